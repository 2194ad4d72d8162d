#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-kit-timeline). Carry .device-deps. In the batch timelines (2026-12-06-h100-batch-timeline)
# half the workers spent 4.7-6.7 ms in their set-up at the first timed batches, all ending together, while 16 kits
# had been made in the untimed window before: are they making kits, or waiting to? probe-ranges-2.patch adds NVTX
# ranges around making a kit and waiting for the pool's one-at-a-time making lock (and the take's inner ranges).
# Two timelines of 64 KiB pieces in 64 MiB batches at 2 GiB. Not a product change.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/kt"; mkdir -p "$o"
{ nvidia-smi -L; nproc; git log --oneline -1 2>/dev/null; } > "$o/machine.txt" 2>&1
git apply lab/results/pending-kit-timeline/probe-ranges-2.patch || exit 1
f=big-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
cmake -S . -B build-kt -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
  -DFERRY_BUILD_TESTS=ON > "$o/cmake.log" 2>&1 &&
  cmake --build build-kt -j 16 --target ferry_small_reads ferry_nvtx_timeline > "$o/build.log" 2>&1 || tail -30 "$o/build.log"
wait
sync; cat $f > /dev/null
for i in 1 2; do
  FERRY_NVTX=1 NVTX_INJECTION64_PATH="$(realpath build-kt/lab/libferry_nvtx_timeline.so)" FERRY_TIMELINE_OUT="$o/timeline-$i.txt" \
    timeout 60 build-kt/lab/ferry_small_reads $f --sizes 64KiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB \
    > "$o/run-$i.txt" 2>&1
done
cat "$o"/run-*.txt
git checkout src
cd "$o" && gzip timeline-*.txt && tar czf ../kt.tgz . && cd .. && rm -rf "$o"
