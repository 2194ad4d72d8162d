#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-writeback). Carry .device-deps and .old-tree (git archive 189e30e). Two timelines of one
# binary an instant apart read a 64-piece take at 1.95 and 0.84 ms (lab/results/2026-12-06-h100-batch-timeline):
# is the page cache slower while the file just written is still being written back? Phase A right after the file is
# made (no sync), with the kernel's Dirty and Writeback before each run; then sync, and phase B: three alternating
# rounds of this tree and 189e30e on the rows issue 50 still misses (64 KiB pieces in 64 MiB batches at 2 and 16 GiB
# a mode, one thread's 4 KiB reads 64 in flight and one at a time, beside the plain loop).
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/wb"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
for t in tree:. old:.old-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-w$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-w$name" -j 8 --target ferry_small_reads > "$o/$name-build.log" 2>&1 || tail -20 "$o/$name-build.log" ) &
done
wait
sr() { find "build-w$1" -name ferry_small_reads -type f | head -1; }
dirty() { echo "$1: $(grep -E '^(Dirty|Writeback):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')" >> "$o/dirty.txt"; }
f=big-4GiB.bin
head -c 4G /dev/urandom > $f
cat $f > /dev/null
for i in 1 2; do
  for t in tree old; do
    dirty "A$i $t"
    timeout 60 "$(sr $t)" $f --sizes 64KiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB > "$o/A$i-$t-b64.txt" 2>&1
  done
done
dirty "before sync"; sync; dirty "after sync"
for round in 1 2 3; do
  order="old tree"; [ $round = 2 ] && order="tree old"
  for t in $order; do
    dirty "B$round $t"
    timeout 60 "$(sr $t)" $f --sizes 64KiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB > "$o/B$round-$t-b64.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 64KiB --modes batch --batch-bytes 64MiB --bytes-per-mode 16GiB > "$o/B$round-$t-b64-16g.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 4KiB --modes ferry,plain --bytes-per-mode 256MiB > "$o/B$round-$t-4k.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > "$o/B$round-$t-4k1.txt" 2>&1
  done
done
cd "$o" && tar czf ../wb.tgz . && cd .. && rm -rf "$o"
