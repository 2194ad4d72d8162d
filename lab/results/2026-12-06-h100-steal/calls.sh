#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-steal). Carry .device-deps. One thread's 4 KiB reads in flight ran 0.56-0.63x the
# plain loop on one H100 and 0.89-0.91x on the next, the same code (bench/NOTES.md, "One thread's small reads: the
# machine, the engine's threads"). ferry_small_reads now prints the machine's steal time a request: four rounds of
# the small-read rows (one thread, 16 threads, the plain loop) with /proc/stat's cpu line before and after.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/steal"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; head -1 /proc/stat; } > "$o/machine.txt" 2>&1
f=small-1GiB.bin
( [ -f $f ] || head -c 1G /dev/urandom > $f ) &
cmake -S . -B build-s -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > "$o/cmake.log" 2>&1 &&
  cmake --build build-s -j 16 --target ferry_small_reads > "$o/build.log" 2>&1 || { tail -20 "$o/build.log"; exit 1; }
wait
sr=$(find build-s -name ferry_small_reads -type f | head -1)
cat $f > /dev/null
for round in 1 2 3 4; do
  head -1 /proc/stat > "$o/stat-$round.txt"
  timeout 40 "$sr" $f --sizes 4KiB,64KiB --modes ferry,ferry-mt,plain --bytes-per-mode 256MiB > "$o/rows-$round.txt" 2>&1
  head -1 /proc/stat >> "$o/stat-$round.txt"
  tar czf "$OUT/steal.tgz" -C "$o" .
done
