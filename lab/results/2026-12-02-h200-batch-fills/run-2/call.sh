#!/bin/bash
# Call 2 (tree a6f6755): build; the fork and ordering fixes on the GPU; issue 22's whole bench and the copy ceiling.
set -u
source .device-deps/gpu-env.sh
scripts/gpu-bounded.sh "200:build"
R=build-gpu/out/r2; mkdir -p $R
echo "== $(date -u +%T) fork, batch and ordering tests"
timeout 120 build-gpu/tests/ferry_unit_tests --gtest_filter='Fork.*:Batch.*' > $R/unit-fork-batch.log 2>&1; tail -3 $R/unit-fork-batch.log
timeout 120 build-gpu/tests/ferry_gpu_tests --gtest_filter='*Batch*:*StreamOrder*' > $R/gpu-batch-streamorder.log 2>&1; grep -E "^\[  (FAILED|PASSED|SKIPPED)" $R/gpu-batch-streamorder.log | tail -8
for i in 1 2 3; do
  PYTHONPATH=build-gpu/python FERRY_CLI=build-gpu/cli/ferry timeout 90 python3 -m pytest python/tests/test_issue_13_gpu.py python/tests/test_fork.py -v -p no:cacheprovider > $R/pytest-order-fork-$i.log 2>&1; tail -1 $R/pytest-order-fork-$i.log; grep -E "FAILED|^E .*(queueing|done|blocked)" $R/pytest-order-fork-$i.log | head -5
done
echo "== $(date -u +%T) save bench"
PYTHONPATH=build-gpu/python timeout 400 python3 bench/safetensors_save_bench.py --dir build-gpu/bench-data --out $R > $R/save-bench.txt 2>&1
tail -32 $R/save-bench.txt
echo "== $(date -u +%T) copy ceiling"
F=$(ls build-gpu/bench-data/*/model-00001-of-00002.safetensors 2>/dev/null | head -1)
[ -n "$F" ] && cat $F > /dev/null && timeout 40 build-gpu/tests/ferry_copy_contention $F > $R/copy-ceiling.txt 2>&1; tail -4 $R/copy-ceiling.txt
echo "== $(date -u +%T) end"
tar czf $OUT/r2.tgz -C build-gpu/out r2
