#!/bin/bash
# Call N6 (2026-12-04): small pieces in batches by batch size and worker count. A worker whose share's reads are
# done waits for its copy before it takes the next job; with more workers than cores another one reads meanwhile.
# 4 KiB and 64 KiB pieces in batches of 32, 64 and 256 MiB (two in flight), Ferry with 16 (the default: the
# cores), 24 and 32 threads, three rounds in rotation; the plain two-buffer pipeline (plain-pipe, no batch
# boundaries) at 16 threads beside them.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
sr=build-gpu/tests/ferry_small_reads
threads=(16 24 32)
mkdir -p $OUT/runs
for round in 1 2 3; do
  cat "$f" > /dev/null
  for k in 0 1 2; do
    t=${threads[$(( (k + round) % 3 ))]}
    for mib in 32 64 256; do
      timeout 60 $sr "$f" --sizes 4KiB,64KiB --bytes-per-mode 1GiB --modes batch --batch-bytes ${mib}MiB --threads $t \
        > $OUT/runs/b$mib-t$t-$round.txt 2>&1
    done
  done
  timeout 60 $sr "$f" --sizes 4KiB,64KiB --bytes-per-mode 1GiB --modes plain-pipe > $OUT/runs/pp-t16-$round.txt 2>&1
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/runs t16 t24 t32 | tee $OUT/summary.txt
grep -h "wrong\|error\|fail" $OUT/runs/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT runs && rm -rf $OUT/runs
log end
