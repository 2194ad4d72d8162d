#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-small-ops-per-drainer). Carry .device-deps. The drainer-count call
# (bench/results/2026-12-06-h100-drainer-count) lifted one thread's 4 KiB reads in flight from 1.54-2.05 GB/s to
# 2.40-2.47 (the plain loop 2.42-2.53) by giving the engine 8 threads instead of 16, its submitter's pread() from
# 1.4-1.8 us to 1.1-1.2: every drainer that waits on the queue costs the submitter's pushes. Fewer drainers for
# small reads from the page cache, all threads kept for the rest: `kSmallOpsPerDrainer` (src/engine/queue.cpp) 4 ->
# 8 (v8) and 16 (v16), against the tree (base), two alternating rounds: the small-read rows beside the plain loop
# (4 KiB, 64 KiB and 1 MiB; one and 16 submitting threads) and one 4 KiB read at a time.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/per"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; grep -n "kSmallOpsPerDrainer =" src/engine/queue.cpp; } > "$o/machine.txt" 2>&1
f=small-2GiB.bin
( [ -f $f ] || head -c 2G /dev/urandom > $f ) &
for n in 8 16; do
  mkdir -p .v-$n && tar c --exclude='./build*' --exclude='./.v-*' --exclude='./small-*' --exclude=./.device-deps \
    --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-$n &&
    sed -i "s/constexpr std::size_t kSmallOpsPerDrainer = 4;/constexpr std::size_t kSmallOpsPerDrainer = $n;/" .v-$n/src/engine/queue.cpp
  grep -n "kSmallOpsPerDrainer =" .v-$n/src/engine/queue.cpp >> "$o/machine.txt"
done
for t in base:. v8:.v-8 v16:.v-16; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-p$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      > "$o/$name-cmake.log" 2>&1 && cmake --build "build-p$name" -j 6 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ) &
done
wait
cat $f > /dev/null
tool() { find "build-p$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2; do
  for t in base v8 v16; do
    timeout 40 "$(tool $t)" $f --sizes 4KiB,64KiB,1MiB --modes ferry,ferry-mt,plain --bytes-per-mode 512MiB \
      > "$o/$t-rows-$round.txt" 2>&1
    timeout 30 "$(tool $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --bytes-per-mode 64MiB --latency-requests 8000 \
      > "$o/$t-one-$round.txt" 2>&1
  done
  tar czf "$OUT/per.tgz" -C "$o" .
done
