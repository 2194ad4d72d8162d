#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-kit-ab). Carry .device-deps and .base-tree (git archive 9f74251). Run on the warm machine
# of the suites call (build-gpu there is this tree's). The staging pool's callers now take a kit released while they
# wait to make one (d73fd0e): 64 KiB pieces in 64 MiB batches at 2 and 16 GiB a mode, this tree against 9f74251,
# three alternating rounds.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/ka"; mkdir -p "$o"
{ nvidia-smi -L; nproc; } > "$o/machine.txt" 2>&1
f=big-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
cmake -S .base-tree -B build-kbase -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
  -DFERRY_BUILD_TESTS=ON > "$o/base-cmake.log" 2>&1 &&
  cmake --build build-kbase -j 16 --target ferry_small_reads > "$o/base-build.log" 2>&1 || tail -20 "$o/base-build.log"
cmake -S . -B build-ktree -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
  -DFERRY_BUILD_TESTS=ON > "$o/tree-cmake.log" 2>&1 &&
  cmake --build build-ktree -j 16 --target ferry_small_reads > "$o/tree-build.log" 2>&1 || tail -20 "$o/tree-build.log"
wait
sync; cat $f > /dev/null
for round in 1 2 3; do
  order="base tree"; [ $round = 2 ] && order="tree base"
  for t in $order; do
    for bytes in 2GiB 16GiB; do
      timeout 60 build-k$t/lab/ferry_small_reads $f --sizes 64KiB --modes batch --batch-bytes 64MiB --bytes-per-mode $bytes \
        > "$o/$t-b64-$bytes-$round.txt" 2>&1
    done
  done
done
grep -H " batch " "$o"/*-b64-*.txt
cd "$o" && tar czf ../ka.tgz . && cd .. && rm -rf "$o"
