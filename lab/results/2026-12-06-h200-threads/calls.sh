#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine; ran 2026-12-06 on the H200 (it ran as lab/results/pending-threads): a next step for issue 50. Carry .device-deps. One thread's 4 KiB reads in flight are bimodal run to run
# in both engines on one instance (1.57-1.79 or 2.30-2.42 GB/s, no steal: lab/results/2026-12-06-h100-cuts-ab), and
# with 8 engine threads they were high in both runs (2026-12-06-h100-drainer-count). Is the low mode 16 drainers
# plus the submitting thread on 16 vCPUs? This tree with the engine's threads at 16, 15, 14 and 12, four rounds in
# rotating order, 4 KiB and 64 KiB reads 64 in flight from one thread (ferry_small_reads --modes ferry), the plain
# loop at 16 once a round; then hot 8 GiB reads at 16 and 15 threads (ferry-bench), to see what a thread fewer costs
# big reads. Release build, no Python package.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/threads"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
f=big-8GiB.bin
( [ -f $f ] || head -c 8G /dev/urandom > $f ) &
( cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
    -DFERRY_BUILD_TESTS=ON > "$o/cmake.log" 2>&1 &&
  cmake --build build-t -j 16 --target ferry_bench ferry_small_reads > "$o/build.log" 2>&1 || tail -20 "$o/build.log" ) &
wait
sync
cat $f > /dev/null
echo "built and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
sr=$(find build-t -name ferry_small_reads -type f | head -1)
bench=$(find build-t -name ferry-bench -type f | head -1)
orders=("16 15 14 12" "15 14 12 16" "14 12 16 15" "12 16 15 14")
for round in 1 2 3 4; do
  [ $(( $(date +%s) - start )) -gt 400 ] && break
  for n in ${orders[$((round - 1))]}; do
    timeout 60 "$sr" $f --sizes 4KiB,64KiB --modes ferry --threads $n --bytes-per-mode 256MiB > "$o/t$n-$round.txt" 2>&1
  done
  timeout 60 "$sr" $f --sizes 4KiB,64KiB --modes plain --threads 16 --bytes-per-mode 256MiB > "$o/plain-$round.txt" 2>&1
done
for round in 1 2; do
  for n in 16 15; do
    [ $(( $(date +%s) - start )) -gt 520 ] && break 2
    timeout 90 "$bench" $f --size 8GiB --cache hot --repeats 3 --routes staged --baselines none --threads $n \
      --json-out "$o/hot8-t$n-$round.json" > "$o/hot8-t$n-$round.txt" 2>&1
  done
done
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
tar czf "$OUT/threads.tgz" -C "$o" .
