#!/bin/bash
# Call H5: 101a3de (H4's tree plus: reads ahead into the allocation in flight classified without the driver,
# RequestState at 744 bytes, its done flag read without its lock) against 49982e0 (.old-tree): build, the C++
# GPU tests, the Python GPU tests, issue 21's goals in two passes, then one hot round alternating old and new.
# Output goes to $OUT as it comes (the session's device time ends near the end of this call).
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
timeout 110 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  (FAILED|SKIPPED) |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -12
log gpu tests done
timeout 115 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -2
cp build-gpu/out/pytest-gpu.log $OUT/ 2>/dev/null
GOALS_PASSES=2 timeout 150 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1; echo "goals rc=$?"
grep -A24 "^copy ceiling" $OUT/goals.log
(cd build-gpu/out && tar czf $OUT/goals.tgz goals-*)
HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 256MiB --modes ferry,ferry-mt,plain,ferry-1,plain-1" COLD_ARGS="" \
  timeout 70 bench/small_reads_ab.sh $OUT/ab 1 > $OUT/ab.log 2>&1; echo "ab rc=$?"
cat $OUT/ab/summary.txt
(cd $OUT/ab && tar czf $OUT/ab.tgz *.txt *.json 2>/dev/null)
log ab done
log end
