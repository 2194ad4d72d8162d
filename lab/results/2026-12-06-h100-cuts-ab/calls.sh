#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-cuts-ab). Carry .device-deps and .base-tree (git archive 63c4344: the engine before the
# session's line cuts, with the same probe). Did the merged line cuts (staging pool, stream order, the file position)
# cost speed? The call before (lab/results/2026-12-06-h100-goals-final) ran on a noisy instance (steal up to 0.9 us a
# request) and showed low single rounds. Here the tree against 63c4344, three alternating rounds, on the rows that
# moved there: hot 8 GiB staged reads, 16 MiB reads 64 in flight, batches of 64 KiB and 1 MiB pieces in 64 and 256 MiB
# batches, one thread's 4 KiB and 1 MiB reads 64 in flight. Release builds, no Python package.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/cuts"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
f=big-8GiB.bin
( [ -f $f ] || head -c 8G /dev/urandom > $f ) &
for t in tree:. base:.base-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-c$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-c$name" -j 8 --target ferry_bench ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
sync
cat $f > /dev/null
echo "built and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
bench() { find "build-c$1" -name ferry-bench -type f | head -1; }
sr() { find "build-c$1" -name ferry_small_reads -type f | head -1; }
late() { [ $(( $(date +%s) - start )) -gt $1 ]; }
for round in 1 2 3; do
  order="base tree"; [ $round = 2 ] && order="tree base"
  for t in $order; do
    late 520 && break 2
    timeout 90 "$(bench $t)" $f --size 8GiB --cache hot --repeats 3 --routes staged --baselines none \
      --json-out "$o/$t-hot8-$round.json" > "$o/$t-hot8-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 16MiB --modes ferry --bytes-per-mode 4GiB > "$o/$t-16m-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 256MiB --bytes-per-mode 4GiB > "$o/$t-b256-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB > "$o/$t-b64-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 4KiB,1MiB --modes ferry --bytes-per-mode 256MiB > "$o/$t-singles-$round.txt" 2>&1
  done
  tar czf "$OUT/cuts.tgz" -C "$o" .
done
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
tar czf "$OUT/cuts.tgz" -C "$o" .
