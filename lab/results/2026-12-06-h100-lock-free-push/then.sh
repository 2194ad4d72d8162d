#!/usr/bin/env bash
# The calls that followed calls.sh on 2026-12-06, on the same warm nvidia-h100-x1, after push.patch landed (7790406;
# the device's copy of the tree had the patch, its .git still named 3d1d093). Carry .device-deps and .old-tree.
#   then.sh 2   build, issue 21's small-read goals, the Python GPU tests
#   then.sh 3   no regression against 189e30e: hot 8 GiB, a fresh process's first read, safetensors hot and cold (2 rounds)
#   then.sh 4   3 alternating rounds, 189e30e (calls.sh's build-sold) and this tree: batches of 64 KiB and 1 MiB pieces
#               in 64 and 256 MiB batches, one thread's 4 KiB reads in flight and one at a time beside the plain loop
#   then.sh 5   3 alternating rounds of 64 MiB batches: the tree before the push (calls.sh's build-sbase), this, 189e30e
set -uo pipefail
source .device-deps/gpu-env.sh
f=build-gpu/data/small-4GiB.bin
old=$(find build-sold -name ferry_small_reads -type f | head -1)
base=$(find build-sbase -name ferry_small_reads -type f | head -1)
new=build-gpu/lab/ferry_small_reads
case $1 in
  2) scripts/gpu-bounded.sh "200:build 240:small-reads-goals 140:pytest-gpu" ;;
  3) OLD_TREE=.old-tree NR_ROUNDS=2 scripts/gpu-bounded.sh "60:build 480:no-regression" ;;
  4) o=$OUT/ab; mkdir -p $o; cat $f > /dev/null
     for round in 1 2 3; do for t in old new; do b=$old; [ $t = new ] && b=$new
       for bb in 64MiB 256MiB; do
         timeout 60 $b $f --sizes 64KiB,1MiB --modes batch --batch-bytes $bb --bytes-per-mode 4GiB > $o/$t-batch-$bb-$round.txt 2>&1
       done
       timeout 60 $b $f --sizes 4KiB --modes ferry,plain,ferry-1,plain-1 --bytes-per-mode 512MiB --latency-requests 8000 \
         > $o/$t-4k-$round.txt 2>&1
     done; done
     tar czf $OUT/ab.tgz -C $o . ;;
  5) o=$OUT/ab2; mkdir -p $o; cat $f > /dev/null
     for round in 1 2 3; do for t in base new old; do b=$old; [ $t = new ] && b=$new; [ $t = base ] && b=$base
       timeout 60 $b $f --sizes 64KiB,1MiB --modes batch --batch-bytes 64MiB --bytes-per-mode 4GiB > $o/$t-batch-64MiB-$round.txt 2>&1
     done; done
     tar czf $OUT/ab2.tgz -C $o . ;;
esac
