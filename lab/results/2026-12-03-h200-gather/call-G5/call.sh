#!/bin/bash
# Call G5 of 2026-12-03: 50b4d7f (b840e9a: gathered reads into GPU memory skip fstat inside the size seen last) on the
# last of the session's device time: the C++ GPU tests, then against d4e20fb (.old-tree) one hot round
# alternating, then the Python GPU tests. Everything is written to $OUT as it comes (the call may be cut short).
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -2
log built
build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  (FAILED|SKIPPED) |^\[==========\] [0-9]+ tests|^\[  PASSED|stress on" $OUT/gpu_tests.log | head -20
log gpu tests done
HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 256MiB --modes ferry,ferry-mt,plain" COLD_ARGS="" \
  bench/small_reads_ab.sh $OUT/ab 1 > $OUT/ab.log 2>&1; echo "ab rc=$?"
cat $OUT/ab/summary.txt
log ab done
timeout 150 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -6
cp $o/pytest-gpu.log $OUT/ 2>/dev/null
log end
