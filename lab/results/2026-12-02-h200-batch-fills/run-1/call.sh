#!/bin/bash
# Call 1 (tree 6794dcd): build, C++ GPU tests, Python GPU tests (and the fork tests), then the batch pack-rule
# matrix for issue 21.
set -u
source .device-deps/gpu-env.sh
scripts/gpu-bounded.sh "200:build 170:test 170:pytest-gpu"
R=build-gpu/out/r1; mkdir -p $R
PYTHONPATH=build-gpu/python FERRY_CLI=build-gpu/cli/ferry timeout 60 python3 -m pytest python/tests/test_fork.py -v -p no:cacheprovider > $R/pytest-fork.log 2>&1; tail -2 $R/pytest-fork.log
F=build-gpu/data/small-4GiB.bin
[ -f $F ] || { build-gpu/cli/ferry write $F --size 4GiB --no-sync > /dev/null && sync; }
cat $F > /dev/null
SR=build-gpu/tests/ferry_small_reads
timeout 40 build-gpu/tests/ferry_copy_contention $F > $R/copy-ceiling.txt 2>&1; tail -3 $R/copy-ceiling.txt
for round in 1 2; do
  echo "== $(date -u +%T) round $round"
  timeout 40 $SR $F --sizes 64KiB,1MiB,4KiB --bytes-per-mode 2GiB --modes batch,plain-fill,plain-pipe --json-out $R/new-d2-$round.json > $R/new-d2-$round.txt 2>&1
  FERRY_BOUNCE_BUFFER_SIZE=2MiB timeout 30 $SR $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --json-out $R/old-d2-$round.json > $R/old-d2-$round.txt 2>&1
  timeout 30 $SR $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --batches-in-flight 1 --json-out $R/new-d1-$round.json > $R/new-d1-$round.txt 2>&1
  FERRY_BOUNCE_BUFFER_SIZE=2MiB timeout 30 $SR $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --batches-in-flight 1 --json-out $R/old-d1-$round.json > $R/old-d1-$round.txt 2>&1
  timeout 30 $SR $F --sizes 64KiB,1MiB --bytes-per-mode 2GiB --modes batch --batch-bytes 64MiB --json-out $R/new-64m-$round.json > $R/new-64m-$round.txt 2>&1
  for t in new-d2 old-d2 new-d1 old-d1 new-64m; do echo "-- $t"; grep -E "batch|plain" $R/$t-$round.txt; done
done
echo "== $(date -u +%T) end"
tar czf $OUT/r1.tgz -C build-gpu/out r1
