#!/bin/bash
# Call F4 of 2026-12-03: ferry_submit_profile (4 KiB reads into the fake GPU: the engine without copies) on the
# 16-core machine, main (.old-tree) against x-locks (a File's use count as one atomic word), alternating.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
log() { echo "== $(date -u +%T) $*"; }
log start
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF"
(cmake -S . -B build-gpu $cfg > $o/cmake.log 2>&1 && cmake --build build-gpu -j 8 --target ferry_submit_profile > $o/build.log 2>&1; echo "new build rc=$?") &
(cmake -S .old-tree -B build-old $cfg > $o/old-cmake.log 2>&1 && cmake --build build-old -j 8 --target ferry_submit_profile > $o/old-build.log 2>&1; echo "old build rc=$?") &
wait
log built
for round in 1 2 3; do
  for which in old new; do
    bin=build-gpu/tests/ferry_submit_profile; [ $which = old ] && bin=build-old/tests/ferry_submit_profile
    for subs in 16 1; do
      echo "r$round $which: $(timeout 30 $bin 100000 64 16 $subs 2>&1 | tail -1)"
    done
  done
done | tee $o/profile.txt
log end
