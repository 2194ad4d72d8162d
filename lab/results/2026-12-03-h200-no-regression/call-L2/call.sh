#!/bin/bash
# Call L2 (2026-12-03, night). Two questions, each in alternating rounds of one build:
# 1. Batched copies (cuMemcpyBatchAsync_v2): pieces whose destinations do not follow one another (batch-scatter)
#    moved with a copy each before; now a fill's runs go in one batched copy. FERRY_X_BATCHED_COPY=0 is the old
#    way. Prediction: 4 KiB scattered pieces rise from about the one-copy-per-piece cap (0.35-0.6 M/s) toward the
#    batched copy's 1 M/s; 64 KiB and 1 MiB change little. The gathered single reads in flight (ferry, ferry-mt)
#    go through the same copies: watched for a loss.
# 2. Batches in flight: with two 32-64 MiB batches in flight the batch boundaries alone hold the pattern at
#    0.76-0.86 of the copy ceiling (K2). Prediction: with four, a worker that ends its share of one batch finds
#    the next queued, and 32/64 MiB batches rise toward plain-pipe (0.92), Ferry and plain-batches alike.
# Then the Python GPU tests and the goals in two passes.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
[ -x build-gpu/tests/ferry_small_reads ] || scripts/gpu-session.sh build 2>&1 | tail -1
log built
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
sr=build-gpu/tests/ferry_small_reads
mkdir -p $OUT/copies $OUT/inflight
declare -A batched=([percopy]=0 [batched]=1)
for round in 1 2; do
  order="percopy batched"; [ $((round % 2)) = 0 ] && order="batched percopy"
  for tree in $order; do
    cat "$f" > /dev/null
    FERRY_X_BATCHED_COPY=${batched[$tree]} timeout 60 $sr "$f" --sizes 4KiB,64KiB,1MiB --bytes-per-mode 512MiB --modes batch-scatter > $OUT/copies/scat-$tree-$round.txt 2>&1
    FERRY_X_BATCHED_COPY=${batched[$tree]} timeout 60 $sr "$f" --sizes 4KiB,64KiB --bytes-per-mode 1GiB --modes ferry,ferry-mt > $OUT/copies/inflight-$tree-$round.txt 2>&1
  done
  order="2 4"; [ $((round % 2)) = 0 ] && order="4 2"
  for n in $order; do
    cat "$f" > /dev/null
    timeout 60 $sr "$f" --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes 32MiB --batches-in-flight $n --modes batch,plain-batches > $OUT/inflight/b32-bif$n-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes 64MiB --batches-in-flight $n --modes batch,plain-batches > $OUT/inflight/b64-bif$n-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 4KiB --bytes-per-mode 2GiB --batch-bytes 256MiB --batches-in-flight $n --modes batch > $OUT/inflight/b256-bif$n-$round.txt 2>&1
  done
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/copies percopy batched | tee $OUT/summary-copies.txt
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/inflight bif2 bif4 | tee $OUT/summary-inflight.txt
grep -h "wrong\|error\|fail" $OUT/copies/*.txt $OUT/inflight/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT copies inflight && rm -rf $OUT/copies $OUT/inflight
log rounds done
timeout 130 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -1
grep -E "passed|failed|error" build-gpu/out/pytest-gpu.log | tail -3 > $OUT/pytest-gpu-summary.txt; cat $OUT/pytest-gpu-summary.txt
log pytest done
GOALS_PASSES=2 timeout 250 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1; echo "goals rc=$?"
grep -A40 "^copy ceiling" $OUT/goals.log
(cd build-gpu/out && tar czf $OUT/goals.tgz goals-*)
log end
