#!/bin/bash
# Call K4 (2026-12-03, evening): lasting jobs yield only to brief work. K3: at 256 MiB batches plain-batches read
# 52.3-52.5 GB/s (0.95 of the copy ceiling) and Ferry 33.7 / 41.6: a 256 MiB batch's jobs have several takes, so
# after each 1 ms turn they yielded to the other batch's queued jobs and the two batches took turns (ending
# together), where 64 MiB batches (one take a job) never yield. Prediction: with lasting jobs yielding only to
# brief ones, 256 MiB batches rise toward plain-batches, 64 MiB ones do not move. One build: FERRY_X_YIELD_ALL=1
# is the old rule. Build, the C++ GPU tests, two alternating rounds, the goals in two passes, the Python GPU tests.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
timeout 100 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
log gpu tests done
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
sr=build-gpu/tests/ferry_small_reads
mkdir -p $OUT/runs
declare -A env=([old]=1 [new]=0)
for round in 1 2; do
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  for tree in $order; do
    cat "$f" > /dev/null
    FERRY_X_YIELD_ALL=${env[$tree]} timeout 40 $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 4GiB --batch-bytes 256MiB --modes batch > $OUT/runs/b256-$tree-$round.txt 2>&1
    FERRY_X_YIELD_ALL=${env[$tree]} timeout 40 $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes 64MiB --modes batch > $OUT/runs/b64-$tree-$round.txt 2>&1
  done
  log "round $round"
done
cat "$f" > /dev/null
timeout 40 $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 4GiB --batch-bytes 256MiB --modes plain-batches,plain-pipe > $OUT/runs/b256-plain-1.txt 2>&1
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/runs old new plain | tee $OUT/summary.txt
grep -h "wrong\|error\|fail" $OUT/runs/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT runs && rm -rf $OUT/runs
log ab done
GOALS_PASSES=2 timeout 250 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1; echo "goals rc=$?"
grep -A40 "^copy ceiling" $OUT/goals.log
(cd build-gpu/out && tar czf $OUT/goals.tgz goals-*)
log goals done
timeout 110 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -1
grep -E "passed|failed|error" build-gpu/out/pytest-gpu.log | tail -3 > $OUT/pytest-gpu-summary.txt; cat $OUT/pytest-gpu-summary.txt
log end
