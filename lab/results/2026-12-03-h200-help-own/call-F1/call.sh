#!/bin/bash
# Call F1 of 2026-12-03: GPU tests of e4c2ce1 (fca70fd's pool job was never run on the GPU), and the batch API's
# rate by worker threads and batch size (Ferry's batches against plain-pipe).
set -u
source .device-deps/gpu-env.sh
b=build-gpu; o=$b/out; mkdir -p $o
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $o/cmake.log 2>&1 &&
  cmake --build $b -j 16 --target ferry_cli ferry_small_reads ferry_copy_contention ferry_gpu_tests > $o/build.log 2>&1
f=$b/data/small-4GiB.bin; mkdir -p $b/data
$b/cli/ferry write $f --size 4GiB --no-sync > /dev/null && sync
cat $f > /dev/null
$b/tests/ferry_copy_contention $f > $o/copy-ceiling.txt 2>&1
timeout 180 $b/tests/ferry_gpu_tests > $o/gpu_tests.log 2>&1
sr=$b/tests/ferry_small_reads
for round in 1 2; do
  for t in 16 24 32; do
    for bb in 32MiB 64MiB 128MiB; do
      timeout 60 $sr $f --threads $t --modes batch --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes $bb \
        --json-out $o/batch-t$t-$bb-r$round.json > $o/batch-t$t-$bb-r$round.txt 2>&1
    done
    timeout 60 $sr $f --threads $t --modes plain-pipe,plain-fill --sizes 64KiB,1MiB --bytes-per-mode 2GiB > $o/pipe-t$t-r$round.txt 2>&1
  done
done
for t in 16 24 32; do
  timeout 90 $sr $f --threads $t --modes ferry,ferry-mt,plain --sizes 4KiB,64KiB --bytes-per-mode 512MiB > $o/single-t$t.txt 2>&1
done
