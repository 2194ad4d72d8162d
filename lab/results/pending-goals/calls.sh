#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps. Issue 50's small-read goals on the tree that holds the
# fewer-crossings and fewer-touches changes (bench/results/2026-12-06-h200-fewer-crossings, 2026-12-06-h100-fewer-
# touches), cut to what the session's last device time allows (a failed start took 212 s of it): the benchmark
# alone is built; 4 KiB, 64 KiB and 1 MiB reads in flight beside the plain loop, then one at a time, alternating
# twice. About 3 minutes.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/goals"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; grep -c uses_begun src/file/file_state.hpp; } > "$o/machine.txt" 2>&1
f=small-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
cmake -S . -B build-goals -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
  > "$o/cmake.log" 2>&1 && cmake --build build-goals -j 16 --target ferry_small_reads > "$o/build.log" 2>&1 || exit 1
wait
cat $f > /dev/null
sr=$(find build-goals -name ferry_small_reads -type f | head -1)
for round in 1 2; do
  timeout 60 "$sr" $f --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --modes ferry,ferry-mt,plain > "$o/in-flight-$round.txt" 2>&1
  timeout 40 "$sr" $f --sizes 4KiB,64KiB,1MiB --modes ferry-1,plain-1 > "$o/one-$round.txt" 2>&1
done
tar czf "$OUT/goals.tgz" -C "$o" .
