#!/bin/bash
# Call E1 of 2026-12-03 (branch x-copywait at d06b812): how a worker waits for its copies, LIFO kits, a longer
# grace; glibc malloc against jemalloc/tcmalloc (LD_PRELOAD of Debian 12's libjemalloc2 5.3.0 and
# libtcmalloc-minimal4 2.10, carried in .x-alloc) and a bigger tcache; variants of one build by environment,
# alternating, two rounds.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o/x
log() { echo "== $(date -u +%T) $*"; }
log start
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $o/machine.txt; nproc >> $o/machine.txt
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
  [yield]="FERRY_X_COPYWAIT=yield"
  [pause]="FERRY_X_COPYWAIT=pause"
  [lifo]="FERRY_X_LIFO=1"
  [je]="LD_PRELOAD=$PWD/.x-alloc/libjemalloc.so.2"
  [tc]="LD_PRELOAD=$PWD/.x-alloc/libtcmalloc_minimal.so.4"
  [tcache]="GLIBC_TUNABLES=glibc.malloc.tcache_count=1024"
  [g200]="FERRY_X_GRACE_US=200"
  [pause-g200]="FERRY_X_COPYWAIT=pause FERRY_X_GRACE_US=200"
)
order="base yield pause lifo g200 pause-g200 je tc tcache"
for round in 1 2; do
  for v in $order; do
    log "$v round $round (${V[$v]})"
    env ${V[$v]} timeout 90 $sr $f --sizes 4KiB,64KiB,1MiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,batch \
      --json-out $o/x/$v-$round.json > $o/x/$v-$round.txt 2>&1 || echo "$v exit $?"
  done
done
log runs done
# summary.txt: per (size, mode) and variant, each round's value [process CPU us, voluntary, involuntary
# context switches a request] (a Python loop over the JSON files; see call E2's for the same shape)
log end
cp -r $o $OUT/
