#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine; ran 2026-12-06 on the H200 (it ran as lab/results/pending-suites-position). Carry .device-deps. The GPU suites after a request at the file position
# settles it in its own completion (b447c93): the full build with the Python package, the C++ GPU tests, then the
# Python GPU tests.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/suites"; mkdir -p "$o"
{ nvidia-smi -L; nproc; git log --oneline -1 2>/dev/null; } > "$o/machine.txt" 2>&1
pack() { cp -r build-gpu/out "$o/gpu-out" 2>/dev/null; tar czf "$OUT/suites.tgz.part" -C "$o" . && mv "$OUT/suites.tgz.part" "$OUT/suites.tgz"; }
start=$(date +%s)
timeout 260 scripts/gpu-bounded.sh "255:build" > "$o/build.txt" 2>&1; pack
timeout 130 build-gpu/tests/ferry_gpu_tests > "$o/gpu-tests.log" 2>&1; echo "exit $?" >> "$o/gpu-tests.log"; pack
left=$((585 - ($(date +%s) - start)))
[ $left -gt 30 ] && timeout $left scripts/gpu-bounded.sh "$((left - 5)):pytest-gpu" > "$o/pytest.txt" 2>&1
pack
