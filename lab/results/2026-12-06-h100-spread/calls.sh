#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine; ran 2026-12-06 on an H100 (it ran as lab/results/pending-spread). Carry .device-deps and .old-tree (git archive 189e30e). Issue 50: how
# widely one thread's 4 KiB reads move from run to run on one machine, in this tree and in 189e30e, each run beside
# the plain loop. Every earlier call had three rounds at most, and the same tree moved up to 1.7x between them
# (2026-12-06-h100-park). Here: the machine's CPU topology (which vCPUs are hyperthreads of one core), then up to
# ten alternating rounds of 4 KiB reads 64 in flight from one thread beside the plain loop, and one 4 KiB read at a
# time beside the plain loop. This tree's probe also prints the CPUs the submitting thread was seen on and how
# often it moved. Release builds of the probes, no Python package.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/spread"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; lscpu; grep . /sys/devices/system/cpu/cpu*/topology/thread_siblings_list; } > "$o/machine.txt" 2>&1
pack() { tar czf "$OUT/spread.tgz.part" -C "$o" . && mv "$OUT/spread.tgz.part" "$OUT/spread.tgz"; }
f=hot-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
for t in tree:. old:.old-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-s$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-s$name" -j 8 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
sync
cat $f > /dev/null
echo "built and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
pack
sr() { find "build-s$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2 3 4 5 6 7 8 9 10; do
  order="tree old"; [ $((round % 2)) = 0 ] && order="old tree"
  for t in $order; do
    [ $(( $(date +%s) - start )) -gt 230 ] && break 2
    timeout 40 "$(sr $t)" $f --sizes 4KiB --modes ferry,plain --bytes-per-mode 256MiB > "$o/$t-singles-$round.txt" 2>&1
    timeout 40 "$(sr $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > "$o/$t-one-$round.txt" 2>&1
  done
  pack
done
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
pack
