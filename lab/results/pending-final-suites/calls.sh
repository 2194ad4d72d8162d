#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps. The GPU suites on the session's tip (issue 50's size
# pass touched the backends, stream order and the bindings): the full build with the Python package, the C++ GPU
# tests (stress included), the stresses within a 64 MiB pinned budget, the Python GPU tests, then pip install of the
# package (its bindings changed).
set -uo pipefail
source .device-deps/gpu-env.sh
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; echo "tree: ${TREE_COMMIT:-unknown}"; } > /tmp/machine.txt 2>&1
scripts/gpu-bounded.sh "${STEPS:-190:build 110:test 75:budget 150:pytest-gpu 55:pip}"
cp /tmp/machine.txt build-gpu/out/ 2>/dev/null; tar czf "$OUT/out.tgz" -C build-gpu/out .
echo "done after $(( $(date +%s) - start )) s"
