#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-batch-ab). Carry .device-deps and .base-tree (git archive f7db709, the session's
# start). The no-regression call (bench/results/2026-12-06-h100-no-regression) found 64 KiB pieces in 64 MiB
# batches at 0.70-0.74x 189e30e on the tree after the line cuts. Did the line cuts (the staging pool keyed by
# KitShape, kits made in platform/cuda/staging_kit) do it? The tree against f7db709, three alternating rounds of
# the batch rows (64 KiB and 1 MiB pieces, 64 MiB and 256 MiB batches), Release builds of ferry_small_reads.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/bab"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; ls src/platform/cuda/staging_kit.hpp .base-tree/src/backends/numa_placement.hpp; } > "$o/machine.txt" 2>&1
f=big-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
for t in tree:. base:.base-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-b$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      > "$o/$name-cmake.log" 2>&1 && cmake --build "build-b$name" -j 8 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
cat $f > /dev/null
sr() { find "build-b$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2 3; do
  order="base tree"; [ $round = 2 ] && order="tree base"
  for t in $order; do
    timeout 60 "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB > "$o/$t-b64-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 256MiB --bytes-per-mode 4GiB > "$o/$t-b256-$round.txt" 2>&1
  done
  tar czf "$OUT/bab.tgz" -C "$o" .
done
