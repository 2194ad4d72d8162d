#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-no-regression). Carry .device-deps and .old-tree (git archive 189e30e). Issue 50's
# no-regression rows on the tree after the line cuts (staging kits now made in platform/cuda/staging_kit, the pool
# keyed by KitShape), against 189e30e in two alternating rounds: hot 8 GiB staged reads against the copy ceiling
# (ferry-bench, 3 repeats), 16 MiB reads with 64 in flight beside the plain loop, and batches of 64 KiB and 1 MiB
# pieces in 64 MiB and 256 MiB batches (ferry_small_reads). Release builds without the Python package.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/nr"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; ls src/platform/cuda/staging_kit.hpp; } > "$o/machine.txt" 2>&1
f=big-8GiB.bin
( [ -f $f ] || head -c 8G /dev/urandom > $f ) &
for t in tree:. old:.old-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-n$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-n$name" -j 8 --target ferry_bench ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
cat $f > /dev/null
bench() { find "build-n$1" -name ferry-bench -type f | head -1; }
sr() { find "build-n$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2; do
  order="old tree"; [ $round = 2 ] && order="tree old"
  for t in $order; do
    base=none; [ $t = tree ] && base=copy
    timeout 90 "$(bench $t)" $f --size 8GiB --cache hot --repeats 3 --routes staged --baselines $base \
      --json-out "$o/$t-hot8-$round.json" > "$o/$t-hot8-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 16MiB --modes ferry,plain --bytes-per-mode 4GiB > "$o/$t-16m-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB > "$o/$t-b64-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 256MiB --bytes-per-mode 4GiB > "$o/$t-b256-$round.txt" 2>&1
  done
  tar czf "$OUT/nr.tgz" -C "$o" .
done
