#!/bin/bash
# Call J4 (2026-12-03, day): 9e0fd6f, the session's last library change. Build it (and branch x-spin from
# .var-tree: a waiting caller looks for 20 us before it sleeps), the Python GPU tests, issue 21's goals in two
# passes, then three rounds alternating x-spin and 9e0fd6f (64 in flight, 4 and 64 KiB), the file read through
# before every process.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
(cmake -S .var-tree -B build-var -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $OUT/var-cmake.log 2>&1 &&
  cmake --build build-var -j 6 --target ferry_small_reads > $OUT/var-build.log 2>&1 || echo "var build failed") &
scripts/gpu-session.sh build 2>&1 | tail -1
wait
log built
timeout 120 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -2
grep -E "passed|failed|error" build-gpu/out/pytest-gpu.log | tail -3 > $OUT/pytest-gpu-summary.txt; cat $OUT/pytest-gpu-summary.txt
log pytest done
GOALS_PASSES=2 timeout 200 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1; echo "goals rc=$?"
grep -A24 "^copy ceiling" $OUT/goals.log
(cd build-gpu/out && tar czf $OUT/goals.tgz goals-*)
log goals done
f=build-gpu/data/small-4GiB.bin
declare -A bin=([main]=build-gpu/tests/ferry_small_reads [spin]=build-var/tests/ferry_small_reads)
mkdir -p $OUT/ab
for round in 1 2 3; do
  order="main spin"; [ $((round % 2)) = 0 ] && order="spin main"
  for tree in $order; do
    cat "$f" > /dev/null
    ${bin[$tree]} "$f" --sizes 4KiB,64KiB --modes ferry,ferry-mt,plain --bytes-per-mode 256MiB > $OUT/ab/ahead-$tree-$round.txt 2>&1
  done
  log "ab round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/ab main spin | tee $OUT/ab-summary.txt
tar czf $OUT/ab.tgz -C $OUT ab && rm -rf $OUT/ab
log end
