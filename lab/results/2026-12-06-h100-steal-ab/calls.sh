#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-steal-ab). Carry .device-deps. Small page-cache ops 8 to a drainer (v8:
# `kSmallOpsPerDrainer` 4 -> 8 in src/engine/queue.cpp, by the sed below) lifted nothing on an H100 whose tree ran
# one thread's 4 KiB reads at 0.89-0.91x the plain loop (bench/results/2026-12-06-h100-small-ops-per-drainer); 8
# engine threads lifted them on one in the slow mode (2026-12-06-h100-drainer-count), where the rate follows the
# host's steal time (2026-12-06-h100-steal). This call: base against v8, three alternating rounds, with the steal
# column, on whichever H100 comes.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/sab"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; head -1 /proc/stat; } > "$o/machine.txt" 2>&1
f=small-1GiB.bin
( [ -f $f ] || head -c 1G /dev/urandom > $f ) &
mkdir -p .v-8 && tar c --exclude='./build*' --exclude='./.v-*' --exclude='./small-*' --exclude=./.device-deps \
  --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-8 &&
  sed -i "s/constexpr std::size_t kSmallOpsPerDrainer = 4;/constexpr std::size_t kSmallOpsPerDrainer = 8;/" .v-8/src/engine/queue.cpp
grep -n "kSmallOpsPerDrainer =" src/engine/queue.cpp .v-8/src/engine/queue.cpp >> "$o/machine.txt"
for t in base:. v8:.v-8; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-a$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      > "$o/$name-cmake.log" 2>&1 && cmake --build "build-a$name" -j 8 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
cat $f > /dev/null
sr() { find "build-a$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2 3; do
  order="base v8"; [ $round = 2 ] && order="v8 base"
  for t in $order; do
    timeout 40 "$(sr $t)" $f --sizes 4KiB,64KiB --modes ferry,ferry-mt,plain --bytes-per-mode 256MiB > "$o/$t-rows-$round.txt" 2>&1
  done
  tar czf "$OUT/sab.tgz" -C "$o" .
done
