#!/usr/bin/env bash
# Written and run 2026-12-06 on the warm H100 right after calls.sh (as three commands: the builds, then rounds 1-10
# and 11-20; the first try of the rounds found no file, the second no library path). Carry .device-deps and
# .old-tree (git archive 189e30e). One thread's 4 KiB reads 64 in flight and one 4 KiB read at a time, each beside
# the plain loop, the tip ("tree") and 189e30e ("old") in alternating rounds on a hot 2 GiB file.
set -u
source .device-deps/gpu-env.sh
o=$OUT/ab; mkdir -p $o
for t in tree:. old:.old-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-a$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > $o/$name-cmake.log 2>&1 &&
    cmake --build "build-a$name" -j 8 --target ferry_small_reads > $o/$name-build.log 2>&1 || tail -5 $o/$name-build.log ) &
done
wait
f=/tmp/hot-2GiB.bin; [ -f $f ] || head -c 2G /dev/urandom > $f; cat $f > /dev/null
sr() { find "build-a$1" -name ferry_small_reads -type f | head -1; }
for round in $(seq 1 20); do
  order="old tree"; [ $((round % 2)) = 0 ] && order="tree old"
  for t in $order; do
    timeout 20 "$(sr $t)" $f --sizes 4KiB --modes ferry,plain --bytes-per-mode 256MiB > $o/$t-singles-$round.txt 2>&1
    timeout 20 "$(sr $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > $o/$t-one-$round.txt 2>&1
  done
done
tar czf $OUT/ab.tgz -C $o .
