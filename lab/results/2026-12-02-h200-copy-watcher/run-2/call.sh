#!/bin/bash
# Run 2 (untracked): this tree (the spare-kit rule) against 60f78f4 (.old-tree), alternating, two rounds;
# a timeline of this tree's 64 KiB batches; C++ and Python GPU tests.
set -u
source .device-deps/gpu-env.sh
R=build-gpu/out/r2; mkdir -p $R
( cmake -S .old-tree -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $R/base-cmake.log 2>&1 &&
  cmake --build build-base -j 6 --target ferry_small_reads > $R/base-build.log 2>&1; echo "base build rc=$?" ) &
base=$!
scripts/gpu-bounded.sh "200:build 150:test"
wait $base
F=build-gpu/data/small-4GiB.bin
[ -f $F ] || { build-gpu/cli/ferry write $F --size 4GiB --no-sync > /dev/null && sync; }
cat $F > /dev/null
timeout 40 build-gpu/tests/ferry_copy_contention $F > $R/copy-ceiling.txt 2>&1; head -3 $R/copy-ceiling.txt
for round in 1 2; do
  echo "== $(date -u +%T) round $round"
  for which in base new; do
    SR=build-gpu/tests/ferry_small_reads; [ $which = base ] && SR=build-base/tests/ferry_small_reads
    timeout 60 $SR $F --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --modes batch --json-out $R/$which-b32-$round.json > $R/$which-b32-$round.txt 2>&1
    timeout 60 $SR $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --batch-bytes 64MiB --json-out $R/$which-b64-$round.json > $R/$which-b64-$round.txt 2>&1
    timeout 60 $SR $F --sizes 1MiB,16MiB --bytes-per-mode 2GiB --modes ferry-mt --json-out $R/$which-single-$round.json > $R/$which-single-$round.txt 2>&1
    echo "-- $which"; cat $R/$which-b32-$round.txt $R/$which-b64-$round.txt $R/$which-single-$round.txt | grep -E "batch|ferry|wrong|rror"
  done
  timeout 40 build-gpu/tests/ferry_small_reads $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes plain-pipe > $R/plain-$round.txt 2>&1; grep -E "plain" $R/plain-$round.txt
done
echo "== $(date -u +%T) timeline"
FERRY_NVTX=1 NVTX_INJECTION64_PATH=$PWD/build-gpu/tests/libferry_nvtx_timeline.so FERRY_TIMELINE_OUT=$R/tl-batch.txt \
  timeout 60 build-gpu/tests/ferry_small_reads $F --sizes 64KiB --bytes-per-mode 1GiB --modes batch > $R/tl-run.txt 2>&1
grep batch $R/tl-run.txt
timeout 60 python3 bench/tools/timeline_summary.py $R/tl-batch.txt --skip 2 --count 32 --threads > $R/tl-summary.txt 2>&1; tail -25 $R/tl-summary.txt
grep -c "worker finish" $R/tl-batch.txt; grep -c "worker set-up" $R/tl-batch.txt
tar czf $OUT/r2.tgz -C build-gpu/out r2
echo "== $(date -u +%T) Python GPU tests"
PYTHONPATH=build-gpu/python FERRY_CLI=build-gpu/cli/ferry timeout 150 python3 -m pytest python/tests/*_gpu.py python/tests/test_batch.py python/tests/test_torch_load_into_module.py python/tests/test_fork.py -q -rfEs -p no:cacheprovider > $R/pytest-gpu.log 2>&1; tail -3 $R/pytest-gpu.log; grep -E "FAILED" $R/pytest-gpu.log | head -8
echo "== $(date -u +%T) end"
cp build-gpu/out/*.log $R/ 2>/dev/null
tar czf $OUT/r2.tgz -C build-gpu/out r2
