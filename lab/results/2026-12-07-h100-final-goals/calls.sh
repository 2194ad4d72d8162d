#!/usr/bin/env bash
# Ran 2026-12-07 at db7f229 (the code of 7be1e93) as bench/results/2026-12-07-h100-final-goals, with ROUNDS_UNTIL=330, in the same call as 2026-12-07-h100-submit-phases (it was written as lab/results/pending-final-goals).
# Written 2026-12-06 on the CPU machine. Carry .device-deps and .old-tree (git archive 189e30e). Issue 50's goal rows
# on the session's tip against 189e30e in alternating rounds, the rows of lab/results/2026-12-06-h100-goals-final:
# hot 8 GiB staged reads, 16 MiB reads 64 in flight, batches of 64 KiB and 1 MiB pieces in 64 and 256 MiB batches
# (three rounds), then one thread's 4 KiB and 1 MiB reads 64 in flight beside the plain loop and one 4 KiB read at a
# time beside the plain loop in every round, up to eight: the small-read rows move between rounds of one binary
# (2026-12-06-h100-spread), so they are judged by their medians. Release builds, no Python package.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/goals"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
f=big-8GiB.bin
( [ -f $f ] || head -c 8G /dev/urandom > $f ) &
for t in tree:. old:.old-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-g$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-g$name" -j 8 --target ferry_bench ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
sync
cat $f > /dev/null
echo "built and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
bench() { find "build-g$1" -name ferry-bench -type f | head -1; }
sr() { find "build-g$1" -name ferry_small_reads -type f | head -1; }
late() { [ $(( $(date +%s) - start )) -gt $1 ]; }
for round in 1 2 3 4 5 6 7 8; do
  order="old tree"; [ $((round % 2)) = 0 ] && order="tree old"
  for t in $order; do
    late ${ROUNDS_UNTIL:-510} && break 2
    if [ $round -le 3 ]; then
      base=none; [ $t = tree ] && base=copy
      timeout 90 "$(bench $t)" $f --size 8GiB --cache hot --repeats 3 --routes staged --baselines $base \
        --json-out "$o/$t-hot8-$round.json" > "$o/$t-hot8-$round.txt" 2>&1
      timeout 60 "$(sr $t)" $f --sizes 16MiB --modes ferry,plain --bytes-per-mode 4GiB > "$o/$t-16m-$round.txt" 2>&1
      timeout 60 "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 256MiB --bytes-per-mode 4GiB > "$o/$t-b256-$round.txt" 2>&1
      timeout 60 "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB > "$o/$t-b64-$round.txt" 2>&1
    fi
    timeout 60 "$(sr $t)" $f --sizes 4KiB,1MiB --modes ferry,plain --bytes-per-mode 256MiB > "$o/$t-singles-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > "$o/$t-one-$round.txt" 2>&1
  done
  tar czf "$OUT/goals.tgz.part" -C "$o" . && mv "$OUT/goals.tgz.part" "$OUT/goals.tgz"
done
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
tar czf "$OUT/goals.tgz.part" -C "$o" . && mv "$OUT/goals.tgz.part" "$OUT/goals.tgz"
