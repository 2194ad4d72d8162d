#!/bin/bash
# Call L2 (2026-12-03, night): batches in flight. K2 showed that with two 32-64 MiB batches in flight the batch
# boundaries alone hold the pattern at 0.76-0.86 of the copy ceiling; a data loader keeps several batches in
# flight. Prediction: with four in flight, a worker that ends its share of one batch finds the next one queued,
# so 32 and 64 MiB batches rise toward plain-pipe (0.92), Ferry and plain-batches alike. Two alternating rounds
# of 2 and 4 in flight at 32, 64 and 256 MiB; then the Python GPU tests and the goals in two passes.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
[ -x build-gpu/tests/ferry_small_reads ] || scripts/gpu-session.sh build 2>&1 | tail -1
log built
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
sr=build-gpu/tests/ferry_small_reads
mkdir -p $OUT/runs
for round in 1 2; do
  order="2 4"; [ $((round % 2)) = 0 ] && order="4 2"
  for n in $order; do
    cat "$f" > /dev/null
    timeout 60 $sr "$f" --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes 32MiB --batches-in-flight $n --modes batch,plain-batches > $OUT/runs/b32-bif$n-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes 64MiB --batches-in-flight $n --modes batch,plain-batches > $OUT/runs/b64-bif$n-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 4KiB --bytes-per-mode 2GiB --batch-bytes 256MiB --batches-in-flight $n --modes batch,plain-batches > $OUT/runs/b256-bif$n-$round.txt 2>&1
  done
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/runs bif2 bif4 | tee $OUT/summary.txt
grep -h "wrong\|error\|fail" $OUT/runs/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT runs && rm -rf $OUT/runs
log rounds done
timeout 130 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -1
grep -E "passed|failed|error" build-gpu/out/pytest-gpu.log | tail -3 > $OUT/pytest-gpu-summary.txt; cat $OUT/pytest-gpu-summary.txt
log pytest done
GOALS_PASSES=2 timeout 250 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1; echo "goals rc=$?"
grep -A40 "^copy ceiling" $OUT/goals.log
(cd build-gpu/out && tar czf $OUT/goals.tgz goals-*)
log end
