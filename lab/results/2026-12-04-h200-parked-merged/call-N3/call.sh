#!/bin/bash
# Call N3 (2026-12-04): did merging parked ends (cc57f70) cost a read at a time? N2's goals pass had 4 KiB reads one
# at a time at 12.77 us against the loop's 8.92 (1.43x; 1.10-1.25x in earlier calls). The tree before the merge
# (24ba2f2, carried as .old-tree) and this one, four alternating rounds: one at a time (4 and 64 KiB), 4 KiB
# pieces in 32 MiB batches, 16 MiB reads with 64 in flight. Then, where the machine has perf, a profile of this
# build's 4 KiB reads one at a time.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
cmake -S .old-tree -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
  > $OUT/old-cmake.log 2>&1 && cmake --build build-old -j "$(nproc)" --target ferry_small_reads > $OUT/old-build.log 2>&1 ||
  { tail -20 $OUT/old-build.log; exit 1; }
log old built
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
declare -A bin=([old]=build-old/tests/ferry_small_reads [new]=build-gpu/tests/ferry_small_reads)
mkdir -p $OUT/runs
for round in 1 2 3 4; do
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  cat "$f" > /dev/null
  for tree in $order; do
    sr=${bin[$tree]}
    timeout 60 $sr "$f" --sizes 4KiB,64KiB --modes ferry-1,plain-1 > $OUT/runs/one-$tree-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 4KiB --bytes-per-mode 1GiB --modes batch > $OUT/runs/batch-$tree-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 16MiB --bytes-per-mode 2GiB --modes ferry > $OUT/runs/r16-$tree-$round.txt 2>&1
  done
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/runs old new | tee $OUT/summary.txt
grep -h "wrong\|error\|fail" $OUT/runs/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT runs && rm -rf $OUT/runs
if command -v perf > /dev/null; then
  perf record -g -o $OUT/perf.data build-gpu/tests/ferry_small_reads "$f" --sizes 4KiB --modes ferry-1 > /dev/null 2>&1
  perf report -i $OUT/perf.data --no-children --sort symbol --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -40 > $OUT/perf-top.txt
  head -40 $OUT/perf-top.txt; rm -f $OUT/perf.data
else
  echo "no perf on this machine"
fi
log end
