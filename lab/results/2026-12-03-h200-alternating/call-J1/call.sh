#!/bin/bash
# Call J1 (2026-12-03, day): is one read at a time slower at 101a3de (the tip's library) than at a1ba69c and 49982e0?
# H5 measured it 0.85x of 49982e0 in one round. Builds the three (.old-tree = 49982e0, .mid-tree = a1ba69c,
# carried), then six rounds, each tree in a fresh process per row, the order rotating every round:
#   one:   4 and 64 KiB one at a time, 20000 requests each, Ferry then the plain loop (the goals' "one" row)
#   ahead: 4 KiB from one thread with 64 in flight, and the plain loop on 16 threads, 256 MiB each
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
build_tree() {  # build_tree SRC DIR
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > "$OUT/$2-cmake.log" 2>&1 &&
    cmake --build "$2" -j 6 --target ferry_small_reads > "$OUT/$2-build.log" 2>&1 || { echo "$2 build failed"; tail -5 "$OUT/$2-build.log"; }
}
build_tree .old-tree build-old & build_tree .mid-tree build-mid &
scripts/gpu-session.sh build 2>&1 | tail -1
wait
log built
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
cat "$f" > /dev/null
declare -A bin=([old]=build-old/tests/ferry_small_reads [mid]=build-mid/tests/ferry_small_reads [new]=build-gpu/tests/ferry_small_reads)
orders=("old mid new" "mid new old" "new old mid")
mkdir -p $OUT/runs
for round in 1 2 3 4 5 6; do
  for tree in ${orders[$(( (round - 1) % 3 ))]}; do
    ${bin[$tree]} "$f" --sizes 4KiB,64KiB --modes ferry-1,plain-1 --latency-requests 20000 > $OUT/runs/one-$tree-$round.txt 2>&1
    ${bin[$tree]} "$f" --sizes 4KiB --modes ferry,plain --bytes-per-mode 256MiB > $OUT/runs/ahead-$tree-$round.txt 2>&1
  done
  log "round $round"
done
# One line per tree and row: the rounds' figures in order (us a request one at a time, GB/s in flight).
for tree in old mid new; do
  for row in "4.00 KiB  ferry-1:one:7" "4.00 KiB  plain-1:one:7" "64.00 KiB ferry-1:one:7" "64.00 KiB plain-1:one:7" "4.00 KiB  ferry :ahead:5" "4.00 KiB  plain :ahead:5"; do
    IFS=: read -r key kind col <<< "$row"
    vals=$(for round in 1 2 3 4 5 6; do grep -F "$key" $OUT/runs/$kind-$tree-$round.txt | awk -v c=$col '{printf "%s ", $c}'; done)
    printf "%-4s %-20s %s\n" "$tree" "$key" "$vals"
  done
done | tee $OUT/summary.txt
(cd $OUT/runs && tar czf $OUT/runs.tgz *.txt)
log end
