#!/bin/bash
# Call H1 (2026-12-03, night): this tree (52ad69d's library: no fstat for one-task reads into GPU memory inside the
# size seen last; 16-64 KiB reads read the page cache first once hot) against 49982e0 (.old-tree): build, the C++
# GPU tests, then two hot rounds alternating old and new (4 and 64 KiB; in flight and one at a time).
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -2
log built
timeout 200 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  (FAILED|SKIPPED) |^\[==========\] [0-9]+ tests|^\[  PASSED|stress on" $OUT/gpu_tests.log | head -20
log gpu tests done
HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 256MiB --modes ferry,ferry-mt,plain,ferry-1,plain-1" COLD_ARGS="" \
  timeout 330 bench/small_reads_ab.sh $OUT/ab 2 > $OUT/ab.log 2>&1; echo "ab rc=$?"
cat $OUT/ab/summary.txt
log end
