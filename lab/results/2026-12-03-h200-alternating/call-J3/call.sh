#!/bin/bash
# Call J3 (2026-12-03, day): 9e0fd6f. Build it and 1d186ae (.old-tree), the C++ GPU tests, then
#  A. batches through the io_uring engine against pread, the same build (FERRY_IO_ENGINE), three rounds
#     alternating: hot batches of 32 MiB (4 KiB, 64 KiB, 1 MiB pieces) and 64 MiB, cold 4 and 64 KiB batches
#     beside raw O_DIRECT;
#  B. this build against 1d186ae, four rounds alternating, the file read through before every process (J2's
#     cold row had evicted it before the second tree's hot rows): one at a time, and 64 in flight.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
(cmake -S .old-tree -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $OUT/old-cmake.log 2>&1 &&
  cmake --build build-old -j 6 --target ferry_small_reads > $OUT/old-build.log 2>&1 || echo "old build failed") &
scripts/gpu-session.sh build 2>&1 | tail -1
wait
log built
timeout 150 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
log gpu tests done
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
new=build-gpu/tests/ferry_small_reads
mkdir -p $OUT/engine $OUT/ab
for round in 1 2 3; do
  order="psync io_uring"; [ $((round % 2)) = 0 ] && order="io_uring psync"
  for engine in $order; do
    cat "$f" > /dev/null
    FERRY_IO_ENGINE=$engine $new "$f" --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --modes batch > $OUT/engine/batch32-$engine-$round.txt 2>&1
    FERRY_IO_ENGINE=$engine $new "$f" --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --batch-bytes 64MiB > $OUT/engine/batch64-$engine-$round.txt 2>&1
    FERRY_IO_ENGINE=$engine $new "$f" --cache cold --sizes 4KiB,64KiB --bytes-per-mode 64MiB --modes raw-host,batch,ferry-mt > $OUT/engine/cold-$engine-$round.txt 2>&1
  done
  log "engine round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/engine psync io_uring | tee $OUT/engine-summary.txt
declare -A bin=([old]=build-old/tests/ferry_small_reads [new]=$new)
for round in 1 2 3 4; do
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  for tree in $order; do
    cat "$f" > /dev/null
    ${bin[$tree]} "$f" --sizes 4KiB,64KiB --modes ferry-1,plain-1 --latency-requests 20000 > $OUT/ab/one-$tree-$round.txt 2>&1
    ${bin[$tree]} "$f" --sizes 4KiB,64KiB --modes ferry,ferry-mt,plain --bytes-per-mode 256MiB > $OUT/ab/ahead-$tree-$round.txt 2>&1
  done
  log "ab round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/ab old new | tee $OUT/ab-summary.txt
tar czf $OUT/runs.tgz -C $OUT engine ab
rm -rf $OUT/engine $OUT/ab
log end
