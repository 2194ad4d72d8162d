#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-batch-timeline). Carry .device-deps and .old-tree (git archive 189e30e). Issue 50's batch row
# that stays behind 189e30e (64 KiB pieces in 64 MiB batches, two in flight: 0.70-0.74x on 2026-12-06): is the gap a
# start-up cost (2 GiB a mode is about 70 ms) or steady, and where the workers' time goes. Three alternating rounds
# of the row at 2 GiB and 16 GiB a mode for this tree and 189e30e, then one NVTX timeline of each at 2 GiB
# (lab/nvtx_timeline.cpp: every task range, worker set-up and finish, request range, with thread and time).
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/bt"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; git log --oneline -1 2>/dev/null; } > "$o/machine.txt" 2>&1
f=big-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
for t in tree:. old:.old-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-b$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-b$name" -j 8 --target ferry_small_reads ferry_nvtx_timeline > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
cat $f > /dev/null
sr() { find "build-b$1" -name ferry_small_reads -type f | head -1; }
tl() { find "build-b$1" -name 'libferry_nvtx_timeline.so' | head -1; }
for round in 1 2 3; do
  order="old tree"; [ $round = 2 ] && order="tree old"
  for t in $order; do
    for bytes in 2GiB 16GiB; do
      timeout 60 "$(sr $t)" $f --sizes 64KiB --modes batch --batch-bytes 64MiB --bytes-per-mode $bytes \
        > "$o/$t-b64-$bytes-$round.txt" 2>&1
    done
  done
done
for t in tree old; do
  FERRY_NVTX=1 NVTX_INJECTION64_PATH="$(realpath "$(tl $t)")" FERRY_TIMELINE_OUT="$o/$t-timeline.txt" \
    timeout 60 "$(sr $t)" $f --sizes 64KiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB \
    > "$o/$t-timeline-run.txt" 2>&1
  gzip -f "$o/$t-timeline.txt"
done
grep -H "GB/s\|batch" "$o"/*-b64-*.txt | grep batch
