#!/bin/bash
# Call A of 2026-12-03 (untracked; branch x-dispatch at 91df6e5): dispatch knobs of the pool, each a variant of
# one build (env), alternating, two rounds; with the new per-row CPU / context-switch / submit-wait figures.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o/x
log() { echo "== $(date -u +%T) $*"; }
log start
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $o/machine.txt; nproc >> $o/machine.txt; git rev-parse HEAD >> $o/machine.txt
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $o/cmake.log 2>&1 &&
  cmake --build build-gpu -j 16 --target ferry_small_reads ferry_cli > $o/build.log 2>&1; echo "build rc=$?"; tail -2 $o/build.log
log built
sr=build-gpu/tests/ferry_small_reads
mkdir -p build-gpu/data; f=build-gpu/data/small-4GiB.bin
[ -f $f ] || build-gpu/cli/ferry write $f --size 4GiB --no-sync > /dev/null
cat $f > /dev/null
log file
declare -A V=(
  [base]=""
  [fanout]="FERRY_X_FANOUT=1"
  [nograce]="FERRY_X_NOGRACE_PIPELINED=1"
  [spin]="FERRY_X_IDLE_SPIN_US=20"
  [nograce-spin]="FERRY_X_NOGRACE_PIPELINED=1 FERRY_X_IDLE_SPIN_US=20"
  [fanout-spin]="FERRY_X_FANOUT=1 FERRY_X_IDLE_SPIN_US=20"
  [slack]="FERRY_X_SLACK=1"
  [all]="FERRY_X_FANOUT=1 FERRY_X_NOGRACE_PIPELINED=1 FERRY_X_IDLE_SPIN_US=20"
)
order="base fanout nograce spin nograce-spin fanout-spin slack all"
for round in 1 2; do
  for v in $order; do
    echo "== $(date -u +%T) $v round $round (${V[$v]})"
    env ${V[$v]} timeout 60 $sr $f --sizes 4KiB,64KiB,1MiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,batch \
      --json-out $o/x/$v-$round.json > $o/x/$v-$round.txt 2>&1 || echo "$v exit $?"
  done
  for t in 8 12; do
    echo "== $(date -u +%T) threads $t round $round"
    timeout 60 $sr $f --threads $t --sizes 4KiB,64KiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,plain \
      --json-out $o/x/threads$t-$round.json > $o/x/threads$t-$round.txt 2>&1 || echo "threads $t exit $?"
  done
done
log runs done
# (then a Python summary of every row per variant into summary.txt: value [cpu us, voluntary, involuntary
# context switches a request] for each round)
log end
tar czf $OUT/rA.tgz -C build-gpu out
