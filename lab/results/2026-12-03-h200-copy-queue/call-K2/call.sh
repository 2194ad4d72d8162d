#!/bin/bash
# Call K2 (2026-12-03, evening): branch x-shared-copy. K1 said plain-pipe (two buffers a thread, no batch
# boundaries) reaches 0.9 of the copy ceiling and plain-fill (one, Ferry's batch job's shape) 0.81, whether
# copies share a stream or not. Prediction: plain-pipe in the batch mode's batches, two of 64 MiB (or 32 MiB)
# in flight, each thread keeping its buffers between batches and noticing its copies' ends between pieces
# (plain-batches), stays near plain-pipe: then a batch engine of that shape could meet the 0.9 goal. Three
# rounds of Ferry's batch, plain-fill, plain-pipe and plain-batches, 64 KiB and 1 MiB pieces.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $OUT/cmake.log 2>&1 &&
  cmake --build build-gpu -j 16 --target ferry_small_reads ferry_copy_contention ferry_cli > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
log built
f=build-gpu/data/small-4GiB.bin
mkdir -p build-gpu/data
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
sr=build-gpu/tests/ferry_small_reads
cat "$f" > /dev/null
build-gpu/tests/ferry_copy_contention "$f" > $OUT/copy-ceiling.txt 2>&1; head -1 $OUT/copy-ceiling.txt
mkdir -p $OUT/runs
for round in 1 2 3; do
  for mb in 64 32; do
    cat "$f" > /dev/null
    $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes ${mb}MiB --modes batch,plain-batches,plain-fill,plain-pipe > $OUT/runs/b$mb-x-$round.txt 2>&1
  done
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/runs x | tee $OUT/summary.txt
grep -h "wrong\|error\|fail" $OUT/runs/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT runs && rm -rf $OUT/runs
log end
