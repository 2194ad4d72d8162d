#!/bin/bash
# Call N4 (2026-12-04, right after N3 on the same machine, both builds kept): N3's 4 KiB batch row again, six
# alternating rounds, with four batches in flight and 64 KiB pieces beside it. Sent as one command line.
source .device-deps/gpu-env.sh
f=build-gpu/data/small-4GiB.bin; mkdir -p $OUT/runs
for round in 1 2 3 4 5 6; do
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"; cat "$f" > /dev/null
  for tree in $order; do
    sr=build-gpu/tests/ferry_small_reads; [ $tree = old ] && sr=build-old/tests/ferry_small_reads
    timeout 60 $sr "$f" --sizes 4KiB --bytes-per-mode 1GiB --modes batch > $OUT/runs/batch-$tree-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 4KiB --bytes-per-mode 1GiB --modes batch --batches-in-flight 4 > $OUT/runs/batchx4-$tree-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 64KiB --bytes-per-mode 2GiB --modes batch > $OUT/runs/b64-$tree-$round.txt 2>&1
  done
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/runs old new | tee $OUT/summary.txt
grep -h "wrong\|error\|fail" $OUT/runs/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT runs && rm -rf $OUT/runs
