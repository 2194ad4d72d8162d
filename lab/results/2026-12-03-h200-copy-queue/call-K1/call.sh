#!/bin/bash
# Call K1 (2026-12-03, evening): branch x-shared-copy. Prediction: a batch's 16 copies, queued at about the same
# time on 16 streams, run side by side and end together, so every worker waits for the whole batch's copies
# before it reads on; on one stream they run in the order queued and free the workers one by one. Build, the
# C++ GPU tests, then three rounds alternating FERRY_X_COPY_QUEUE=0 (each kit's stream, main's way) and =1
# (one copy queue per GPU): batches of 32 MiB (4 KiB, 64 KiB, 1 MiB pieces) and 64 MiB (64 KiB, 1 MiB), and the
# pattern without Ferry, one buffer and two a thread, each on its own streams and on one shared stream.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
timeout 150 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
log gpu tests done
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
sr=build-gpu/tests/ferry_small_reads
cat "$f" > /dev/null
build-gpu/tests/ferry_copy_contention "$f" > $OUT/copy-ceiling.txt 2>&1; head -1 $OUT/copy-ceiling.txt
mkdir -p $OUT/runs
declare -A env=([stream]=0 [queue]=1)
for round in 1 2 3; do
  order="stream queue"; [ $((round % 2)) = 0 ] && order="queue stream"
  for tree in $order; do
    cat "$f" > /dev/null
    FERRY_X_COPY_QUEUE=${env[$tree]} $sr "$f" --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --modes batch > $OUT/runs/batch32-$tree-$round.txt 2>&1
    FERRY_X_COPY_QUEUE=${env[$tree]} $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --batch-bytes 64MiB > $OUT/runs/batch64-$tree-$round.txt 2>&1
  done
  cat "$f" > /dev/null
  $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes plain-fill,plain-fill-queue,plain-pipe,plain-pipe-queue > $OUT/runs/plain-x-$round.txt 2>&1
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/runs stream queue x | tee $OUT/summary.txt
grep -h "wrong\|error\|fail" $OUT/runs/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT runs && rm -rf $OUT/runs
log end
