#!/bin/bash
# Call 3 (untracked): builds this tree and the one before the deferred finish (.old-tree, 5281033); GPU
# tests (C++, Python); the fork and ordering tests again; batches A/B.
set -u
source .device-deps/gpu-env.sh
R=build-gpu/out/r3; mkdir -p $R
( cmake -S .old-tree -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $R/base-cmake.log 2>&1 &&
  cmake --build build-base -j 8 --target ferry_small_reads > $R/base-build.log 2>&1; echo "base build rc=$?" ) &
base=$!
scripts/gpu-bounded.sh "200:build 150:test"
wait $base
echo "== $(date -u +%T) Python GPU tests, fork and ordering"
PYTHONPATH=build-gpu/python FERRY_CLI=build-gpu/cli/ferry timeout 170 python3 -m pytest python/tests/*_gpu.py python/tests/test_batch.py python/tests/test_torch_load_into_module.py python/tests/test_errors.py python/tests/test_fork.py -v -rfEs -p no:cacheprovider > $R/pytest-gpu.log 2>&1; tail -1 $R/pytest-gpu.log; grep -E "FAILED|^E .*(queueing|done|blocked|Error)" $R/pytest-gpu.log | head -8
PYTHONPATH=build-gpu/python FERRY_CLI=build-gpu/cli/ferry timeout 60 python3 -m pytest python/tests/test_issue_13_gpu.py python/tests/test_fork.py -v -p no:cacheprovider > $R/pytest-order-fork-2.log 2>&1; tail -1 $R/pytest-order-fork-2.log
F=build-gpu/data/small-4GiB.bin
[ -f $F ] || { build-gpu/cli/ferry write $F --size 4GiB --no-sync > /dev/null && sync; }
cat $F > /dev/null
timeout 40 build-gpu/tests/ferry_copy_contention $F > $R/copy-ceiling.txt 2>&1; head -1 $R/copy-ceiling.txt
for round in 1 2; do
  echo "== $(date -u +%T) round $round"
  for which in base new; do
    SR=build-gpu/tests/ferry_small_reads; [ $which = base ] && SR=build-base/tests/ferry_small_reads
    timeout 40 $SR $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --json-out $R/$which-d2-$round.json > $R/$which-d2-$round.txt 2>&1
    timeout 40 $SR $F --sizes 1MiB,16MiB --bytes-per-mode 2GiB --modes ferry --json-out $R/$which-single-$round.json > $R/$which-single-$round.txt 2>&1
    echo "-- $which"; grep -E "batch|ferry" $R/$which-d2-$round.txt $R/$which-single-$round.txt | sed 's/^[^:]*://'
  done
  timeout 30 build-gpu/tests/ferry_small_reads $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes plain-pipe > $R/plain-$round.txt 2>&1; grep plain $R/plain-$round.txt
done
echo "== $(date -u +%T) end"
tar czf $OUT/r3.tgz -C build-gpu/out r3
