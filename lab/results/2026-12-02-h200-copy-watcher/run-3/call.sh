#!/bin/bash
# Run 3 (untracked): the watcher again (branch exp-watcher, 59b68fa) with twice the kits reserved at a request's
# set-up (so that no kit is pinned in a timed region), against 60f78f4 (.old-tree), alternating, two rounds.
set -u
source .device-deps/gpu-env.sh
R=build-gpu/out/r3; mkdir -p $R
( cmake -S .old-tree -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $R/base-cmake.log 2>&1 &&
  cmake --build build-base -j 6 --target ferry_small_reads > $R/base-build.log 2>&1; echo "base build rc=$?" ) &
base=$!
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $R/cmake.log 2>&1 &&
  cmake --build build-gpu -j 10 --target ferry_small_reads ferry_cli ferry_copy_contention > $R/build.log 2>&1; echo "new build rc=$?"
wait $base
F=build-gpu/data/small-4GiB.bin
mkdir -p build-gpu/data
[ -f $F ] || { build-gpu/cli/ferry write $F --size 4GiB --no-sync > /dev/null && sync; }
cat $F > /dev/null
timeout 40 build-gpu/tests/ferry_copy_contention $F > $R/copy-ceiling.txt 2>&1; head -1 $R/copy-ceiling.txt
for round in 1 2; do
  echo "== $(date -u +%T) round $round"
  for which in base new; do
    SR=build-gpu/tests/ferry_small_reads; [ $which = base ] && SR=build-base/tests/ferry_small_reads
    timeout 60 $SR $F --sizes 64KiB,1MiB,4KiB --bytes-per-mode 2GiB --modes batch --json-out $R/$which-b32-$round.json > $R/$which-b32-$round.txt 2>&1
    timeout 60 $SR $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --batch-bytes 64MiB --json-out $R/$which-b64-$round.json > $R/$which-b64-$round.txt 2>&1
    timeout 60 $SR $F --sizes 16MiB,1MiB --bytes-per-mode 2GiB --modes ferry-mt --json-out $R/$which-single-$round.json > $R/$which-single-$round.txt 2>&1
    echo "-- $which"; cat $R/$which-b32-$round.txt $R/$which-b64-$round.txt $R/$which-single-$round.txt | grep -E "batch|ferry|wrong|rror"
  done
done
timeout 40 build-gpu/tests/ferry_small_reads $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes plain-pipe > $R/plain.txt 2>&1; grep -E "plain" $R/plain.txt
echo "== $(date -u +%T) end"
tar czf $OUT/r3.tgz -C build-gpu/out r3
