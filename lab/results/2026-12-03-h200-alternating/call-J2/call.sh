#!/bin/bash
# Call J2 (2026-12-03, day): dae93e5 (fewer allocations for gathered reads and a read at a time; a thread that
# reads ahead hands its reads to the workers at once) against 1d186ae (.old-tree): build both, the C++ GPU
# tests, then four rounds alternating the order, each tree in a fresh process per row:
#   one:   4 and 64 KiB one at a time, 20000 requests each, Ferry then the plain loop
#   ahead: 4 and 64 KiB with 64 in flight from one thread (ferry) and from 16 (ferry-mt), the plain loop, 256 MiB each
#   cold:  4 KiB from the disk: raw O_DIRECT on 16 threads, ferry-mt, ferry, batches, 64 MiB each
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
grep -E "^\[  (FAILED|SKIPPED) |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -12
log gpu tests done
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
declare -A bin=([old]=build-old/tests/ferry_small_reads [new]=build-gpu/tests/ferry_small_reads)
mkdir -p $OUT/runs
for round in 1 2 3 4; do
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  cat "$f" > /dev/null
  for tree in $order; do
    ${bin[$tree]} "$f" --sizes 4KiB,64KiB --modes ferry-1,plain-1 --latency-requests 20000 > $OUT/runs/one-$tree-$round.txt 2>&1
    ${bin[$tree]} "$f" --sizes 4KiB,64KiB --modes ferry,ferry-mt,plain --bytes-per-mode 256MiB > $OUT/runs/ahead-$tree-$round.txt 2>&1
    ${bin[$tree]} "$f" --cache cold --sizes 4KiB --modes raw-host,ferry-mt,ferry,batch --bytes-per-mode 64MiB > $OUT/runs/cold-$tree-$round.txt 2>&1
  done
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/runs old new | tee $OUT/summary.txt
(cd $OUT/runs && tar czf $OUT/runs.tgz *.txt)
log end
