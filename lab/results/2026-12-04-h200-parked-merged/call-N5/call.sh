#!/bin/bash
# Call N5 (2026-12-04): is N3/N4's 4 KiB batch row (two 32 MiB batches in flight, 0.86-0.90x of the tree before the
# merge) the change or the row's spread? Batch jobs never park, and their path gained only a thread-local check per
# take and per pool loop. Four "trees" in rotation, eight rounds: old (24ba2f2, .old-tree), new (this tree), var
# (this tree without those checks, .var-tree: the same code otherwise, laid out anew), and olda (old's very binary
# again: the spread of the procedure itself).
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
for t in old var; do
  cmake -S .$t-tree -B build-$t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
    > $OUT/$t-cmake.log 2>&1 && cmake --build build-$t -j "$(nproc)" --target ferry_small_reads > $OUT/$t-build.log 2>&1 ||
    { tail -20 $OUT/$t-build.log; exit 1; }
done
log built
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
declare -A bin=([old]=build-old/tests/ferry_small_reads [olda]=build-old/tests/ferry_small_reads
                [new]=build-gpu/tests/ferry_small_reads [var]=build-var/tests/ferry_small_reads)
trees=(old new var olda)
mkdir -p $OUT/runs
for round in 1 2 3 4 5 6 7 8; do
  cat "$f" > /dev/null
  for k in 0 1 2 3; do
    tree=${trees[$(( (k + round) % 4 ))]}
    timeout 60 ${bin[$tree]} "$f" --sizes 4KiB --bytes-per-mode 1GiB --modes batch > $OUT/runs/b2-$tree-$round.txt 2>&1
    timeout 60 ${bin[$tree]} "$f" --sizes 4KiB --bytes-per-mode 1GiB --modes batch --batches-in-flight 4 > $OUT/runs/b4-$tree-$round.txt 2>&1
  done
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/runs old olda new var | tee $OUT/summary.txt
grep -h "wrong\|error\|fail" $OUT/runs/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT runs && rm -rf $OUT/runs
log end
