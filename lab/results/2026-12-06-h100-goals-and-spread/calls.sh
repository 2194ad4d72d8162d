#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-goals). Carry .device-deps. Issue 50's small-read rows on this tree (it holds the
# fewer-crossings and fewer-touches changes: bench/results/2026-12-06-h200-fewer-crossings, 2026-12-06-h100-fewer-
# touches) and on `spread` = this tree + spread.patch: a take of one-op requests shares what waits among every
# drainer started, not only the free ones. In the fewer-touches call one thread's 64 KiB reads in flight ran at
# 4.1-6.0 GB/s in four of six rows and 10-12 in the others; the slow rows had 0.92-0.93 ops a request taken with
# other requests' (the fast 0.39-0.54) and waited 8-9 us a request (1.3-1.7): a lone free drainer took all that
# waited. Cut to what the session's last device time allows (a failed start took 212 s of it): the benchmark
# alone is built; 4 KiB, 64 KiB and 1 MiB reads in flight beside the plain loop, then one at a time, two
# alternating rounds. About 3 minutes.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/goals"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; grep -c uses_begun src/file/file_state.hpp; } > "$o/machine.txt" 2>&1
f=small-2GiB.bin
( [ -f $f ] || head -c 2G /dev/urandom > $f ) &
mkdir -p .v-spread && tar c --exclude='./build*' --exclude='./.v-*' --exclude='./small-*' --exclude=./.device-deps --exclude=./bench/results \
  --exclude=./lab/results . | tar x -C .v-spread && git apply --directory=.v-spread lab/results/2026-12-06-h100-goals-and-spread/spread.patch || exit 1
for t in tree:. spread:.v-spread; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-g$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      > "$o/$name-cmake.log" 2>&1 && cmake --build "build-g$name" -j 8 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ) &
done
wait
cat $f > /dev/null
tool() { find "build-g$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2; do
  for t in tree spread; do
    timeout 40 "$(tool $t)" $f --sizes 4KiB,64KiB,1MiB --modes ferry,ferry-mt,plain --bytes-per-mode 512MiB \
      > "$o/$t-rows-$round.txt" 2>&1
    timeout 30 "$(tool $t)" $f --sizes 4KiB,64KiB --modes ferry-1,plain-1 --bytes-per-mode 64MiB --latency-requests 8000 \
      > "$o/$t-one-$round.txt" 2>&1
  done
  tar czf "$OUT/goals.tgz" -C "$o" .
done
