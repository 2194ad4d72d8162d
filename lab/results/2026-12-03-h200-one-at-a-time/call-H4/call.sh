#!/bin/bash
# Call H4: a1ba69c (H1's changes, plus below_gds_threshold's short detail and a one-job request's job kept in the
# request) against 49982e0 (.old-tree): build, the C++ GPU tests, two hot rounds alternating old and new, the
# Python GPU tests, then issue 21's goals in two passes. Output goes to $OUT as it comes.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
timeout 150 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  (FAILED|SKIPPED) |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -12
log gpu tests done
HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 256MiB --modes ferry,ferry-mt,plain,ferry-1,plain-1" COLD_ARGS="" \
  timeout 150 bench/small_reads_ab.sh $OUT/ab 2 > $OUT/ab.log 2>&1; echo "ab rc=$?"
cat $OUT/ab/summary.txt
log ab done
timeout 130 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -2
cp build-gpu/out/pytest-gpu.log $OUT/ 2>/dev/null
GOALS_PASSES=2 timeout 170 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1; echo "goals rc=$?"
grep -A24 "^copy ceiling" $OUT/goals.log
(cd build-gpu/out && tar czf $OUT/goals.tgz goals-*)
log end
