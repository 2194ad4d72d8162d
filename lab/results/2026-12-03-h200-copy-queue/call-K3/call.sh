#!/bin/bash
# Call K3 (2026-12-03, evening): main with K2's bench (plain-batches) and a 256 MiB batch row in the goals. Build,
# the C++ and Python GPU tests, issue 21's goals in two passes, then one pass of Ferry's batches beside
# plain-batches and plain-pipe at 256 MiB (two in flight): does a larger batch let the 0.9 goal be met?
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
timeout 120 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
log gpu tests done
timeout 150 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -2
grep -E "passed|failed|error" build-gpu/out/pytest-gpu.log | tail -3 > $OUT/pytest-gpu-summary.txt; cat $OUT/pytest-gpu-summary.txt
log pytest done
GOALS_PASSES=2 timeout 260 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1; echo "goals rc=$?"
grep -A40 "^copy ceiling" $OUT/goals.log
(cd build-gpu/out && tar czf $OUT/goals.tgz goals-*)
log goals done
f=build-gpu/data/small-4GiB.bin
cat "$f" > /dev/null
timeout 60 build-gpu/tests/ferry_small_reads "$f" --sizes 64KiB,1MiB --bytes-per-mode 4GiB --batch-bytes 256MiB \
  --modes batch,plain-batches,plain-pipe > $OUT/batches-256.txt 2>&1; cat $OUT/batches-256.txt | grep -v "^ "
log end
