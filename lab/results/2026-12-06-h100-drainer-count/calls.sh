#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-drainer-count). Carry .device-deps. One thread's 4 KiB reads in flight cost 20-21 us of CPU
# a request on all threads (189e30e 12-13) while the submitter's own pread() took 1.8-2.1 us (189e30e 1.3-1.4)
# (bench/results/2026-12-06-h100-smaller-engine); on the CPU machine the same submit takes 0.7 us. Question: do
# the other threads (drainers lingering, the pool's clock watcher) slow the submitting thread, e.g. from a sibling
# hyperthread? This call times the row with the engine's threads at 16, 8, 4 and 2 (the plain loop at 16 beside),
# in two alternating rounds, and records the machine's core topology.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/drainers"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; lscpu; cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list; } > "$o/machine.txt" 2>&1
f=small-1GiB.bin
( [ -f $f ] || head -c 1G /dev/urandom > $f ) &
cmake -S . -B build-d -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > "$o/cmake.log" 2>&1 &&
  cmake --build build-d -j 16 --target ferry_small_reads > "$o/build.log" 2>&1 || { tail -20 "$o/build.log"; exit 1; }
wait
sr=$(find build-d -name ferry_small_reads -type f | head -1)
cat $f > /dev/null
for round in 1 2; do
  for n in 16 8 4 2; do
    timeout 30 "$sr" $f --sizes 4KiB,64KiB --modes ferry --threads $n --bytes-per-mode 256MiB > "$o/ferry-t$n-$round.txt" 2>&1
  done
  timeout 30 "$sr" $f --sizes 4KiB,64KiB --modes plain --threads 16 --bytes-per-mode 256MiB > "$o/plain-$round.txt" 2>&1
  timeout 30 "$sr" $f --sizes 4KiB --modes ferry-1,plain-1 --threads 4 --bytes-per-mode 32MiB --latency-requests 4000 > "$o/one-t4-$round.txt" 2>&1
  tar czf "$OUT/drainers.tgz" -C "$o" .
done
