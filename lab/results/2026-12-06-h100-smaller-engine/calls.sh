#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-smaller-engine). Carry .device-deps and .old-tree (git archive 189e30e). The tree after the
# session's line cuts (staging kits made in platform/cuda/staging_kit, KitShape, one way to make a ready future,
# batch and scattered reads in one file, the Python binding's cursor in FileRequests, comments kept once): its
# full build with the Python package, the C++ GPU tests, issue 50's small-read rows beside the plain loop and
# 189e30e in two alternating rounds, then the Python GPU tests with what is left of 585 s.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/smaller"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; ls src/platform/cuda/staging_kit.hpp; } > "$o/machine.txt" 2>&1
pack() { cp -r build-gpu/out "$o/gpu-out" 2>/dev/null; tar czf "$OUT/smaller.tgz.part" -C "$o" . && mv "$OUT/smaller.tgz.part" "$OUT/smaller.tgz"; }
start=$(date +%s)
f=small-2GiB.bin
( [ -f $f ] || head -c 2G /dev/urandom > $f ) &
( cmake -S .old-tree -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
    > "$o/old-cmake.log" 2>&1 && cmake --build build-old -j 4 --target ferry_small_reads > "$o/old-build.log" 2>&1 ) &
timeout 250 scripts/gpu-bounded.sh "245:build" > "$o/build.txt" 2>&1
wait
pack
timeout 120 build-gpu/tests/ferry_gpu_tests > "$o/gpu-tests.log" 2>&1; echo "exit $?" >> "$o/gpu-tests.log"; pack
cat $f > /dev/null
tool() { [ "$1" = tree ] && echo build-gpu/lab/ferry_small_reads || find build-old -name ferry_small_reads -type f | head -1; }
for round in 1 2; do
  for t in tree old; do
    timeout 40 "$(tool $t)" $f --sizes 4KiB,64KiB,1MiB --modes ferry,ferry-mt,plain --bytes-per-mode 512MiB \
      > "$o/$t-rows-$round.txt" 2>&1
    timeout 30 "$(tool $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --bytes-per-mode 64MiB --latency-requests 8000 \
      > "$o/$t-one-$round.txt" 2>&1
  done
  pack
done
left=$((585 - ($(date +%s) - start)))
[ $left -gt 40 ] && timeout $left scripts/gpu-bounded.sh "$((left - 5)):pytest-gpu" > "$o/pytest.txt" 2>&1
pack
