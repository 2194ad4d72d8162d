#!/usr/bin/env bash
# Second call of the same day (it ran after calls.sh): the tree with probe-ranges.patch (NVTX ranges around a take's
# reads, its copies' queueing, each wait for a bounce buffer's copy, and the queue's waits at a switch between
# requests and at a request's end), one timeline of 64 KiB pieces in 64 MiB batches at 2 GiB. Not a product change.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/rt"; mkdir -p "$o"
git apply lab/results/pending-batch-timeline/probe-ranges.patch || exit 1
f=big-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
cmake -S . -B build-rt -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
  -DFERRY_BUILD_TESTS=ON > "$o/cmake.log" 2>&1 &&
  cmake --build build-rt -j 16 --target ferry_small_reads ferry_nvtx_timeline > "$o/build.log" 2>&1 || tail -30 "$o/build.log"
wait
cat $f > /dev/null
for i in 1 2; do
  FERRY_NVTX=1 NVTX_INJECTION64_PATH="$(realpath build-rt/lab/libferry_nvtx_timeline.so)" FERRY_TIMELINE_OUT="$o/timeline-$i.txt" \
    timeout 60 build-rt/lab/ferry_small_reads $f --sizes 64KiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB \
    > "$o/run-$i.txt" 2>&1
done
cat "$o"/run-*.txt
git checkout src
cd "$o" && tar czf ../rt.tgz . && cd .. && rm -rf "$o"
