#!/bin/bash
# Run 1 (untracked): builds this tree and 60f78f4 (.old-tree); C++ GPU tests; batches and singles A/B,
# alternating; the 1 and 8 GiB hot read A/B; Python GPU tests. (Echo lines of the original left out.)
set -u
source .device-deps/gpu-env.sh
R=build-gpu/out/r1; mkdir -p $R
( cmake -S .old-tree -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $R/base-cmake.log 2>&1 &&
  cmake --build build-base -j 6 --target ferry_small_reads ferry_cli ferry_bench > $R/base-build.log 2>&1; echo "base build rc=$?" ) &
base=$!
scripts/gpu-bounded.sh "200:build 150:test"
wait $base
F=build-gpu/data/small-4GiB.bin
[ -f $F ] || { build-gpu/cli/ferry write $F --size 4GiB --no-sync > /dev/null && sync; }
cat $F > /dev/null
timeout 40 build-gpu/tests/ferry_copy_contention $F > $R/copy-ceiling.txt 2>&1
for round in 1 2; do
  for which in base new; do
    SR=build-gpu/tests/ferry_small_reads; [ $which = base ] && SR=build-base/tests/ferry_small_reads
    timeout 60 $SR $F --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --modes batch --json-out $R/$which-b32-$round.json > $R/$which-b32-$round.txt 2>&1
    timeout 60 $SR $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --batch-bytes 64MiB --json-out $R/$which-b64-$round.json > $R/$which-b64-$round.txt 2>&1
    timeout 60 $SR $F --sizes 1MiB,16MiB --bytes-per-mode 2GiB --modes ferry,ferry-mt --json-out $R/$which-single-$round.json > $R/$which-single-$round.txt 2>&1
  done
  timeout 40 build-gpu/tests/ferry_small_reads $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes plain-pipe > $R/plain-$round.txt 2>&1
done
OLD_FERRY=build-base/cli/ferry AB_SIZES="1GiB 8GiB" timeout 120 scripts/gpu-bounded.sh "110:ab"
PYTHONPATH=build-gpu/python FERRY_CLI=build-gpu/cli/ferry timeout 150 python3 -m pytest python/tests/*_gpu.py python/tests/test_batch.py python/tests/test_torch_load_into_module.py python/tests/test_fork.py -q -rfEs -p no:cacheprovider > $R/pytest-gpu.log 2>&1
cp -r build-gpu/out/*.log build-gpu/out/ab-* $R/ 2>/dev/null
tar czf $OUT/r1.tgz -C build-gpu/out r1
