#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps. Issue 50's small-read goals on the tree that holds the
# fewer-crossings and fewer-touches changes (bench/results/2026-12-06-h200-fewer-crossings, 2026-12-06-h100-fewer-
# touches): the full build, the goals step (4, 64 KiB, 1 and 16 MiB in flight beside the plain loop, one at a time,
# batches, cold), then the C++ GPU tests with what is left of ten minutes.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/goals"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; grep -c uses_begun src/file/file_state.hpp; } > "$o/machine.txt" 2>&1
pack() { cp -r build-gpu/out "$o/gpu-out" 2>/dev/null; tar czf "$OUT/goals.tgz.part" -C "$o" . && mv "$OUT/goals.tgz.part" "$OUT/goals.tgz"; }
timeout 480 scripts/gpu-bounded.sh "230:build 240:small-reads-goals" > "$o/steps.txt" 2>&1
pack
left=$((575 - SECONDS))
[ $left -gt 30 ] && timeout $left build-gpu/tests/ferry_gpu_tests > "$o/gpu-tests.log" 2>&1
pack
