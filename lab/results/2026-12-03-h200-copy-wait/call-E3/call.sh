#!/bin/bash
# Call E3 of 2026-12-03: no-regression of big staged reads (1 and 8 GiB, hot; 6bf062c against 7d2c3a5 in
# .old-tree, alternating, two rounds of five) and issue 21's goals on 6bf062c.
set -u
source .device-deps/gpu-env.sh
b=build-gpu; o=$b/out; mkdir -p $o
log() { echo "== $(date -u +%T) $*"; }
log start
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $o/cmake.log 2>&1 &&
  cmake --build $b -j 16 --target ferry_cli ferry_bench ferry_small_reads ferry_copy_contention > $o/build.log 2>&1; echo "build rc=$?"
cmake -S .old-tree -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $o/old-cmake.log 2>&1 &&
  cmake --build build-old -j 16 --target ferry_cli ferry_bench > $o/old-build.log 2>&1; echo "old build rc=$?"
log built
OLD_FERRY=build-old/cli/ferry AB_SIZES="1GiB 8GiB" timeout 150 scripts/gpu-session.sh ab 2>&1 | grep -v "^session\|^== .*done"
log ab done
timeout 170 scripts/gpu-session.sh small-reads-goals 2>&1 | tail -40
log end
tar czf $OUT/e3.tgz -C $b out
