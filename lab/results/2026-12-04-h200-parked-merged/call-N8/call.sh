#!/bin/bash
# Call N8 (2026-12-04): the GPU tests on the tip after 1cef44d (callbacks end a thread's parked end first; a job run
# for a waiter does not park): C++ GPU tests, Python GPU tests, and 16 MiB reads with 64 in flight (still
# parking: 0.89-0.92 of the copy ceiling in N1-N3).
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
timeout 100 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
log gpu tests done
timeout 150 scripts/gpu-session.sh pytest-gpu > $OUT/pytest-gpu.log 2>&1; echo "pytest-gpu rc=$?"
grep -E "passed|failed" $OUT/pytest-gpu.log | tail -2
log pytest done
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
cat "$f" > /dev/null
timeout 60 build-gpu/tests/ferry_small_reads "$f" --sizes 16MiB --bytes-per-mode 2GiB --modes ferry,ferry-mt,plain > $OUT/in-flight.txt 2>&1
grep -v "^#" $OUT/in-flight.txt | tail -6
log end
