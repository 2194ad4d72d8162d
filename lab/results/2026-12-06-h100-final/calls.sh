#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine; ran 2026-12-06 on an H100 (it ran as lab/results/pending-final). Carry .device-deps. The session's last call for issue 50, on e4a16f4,
# the merged structural cuts: (1) the GPU suites (the full build with the Python package, the C++ GPU tests, the
# Python GPU tests); (2) one thread's small reads, this tree ("tree") against it with busy-drainers-take.patch
# ("busy": a busy drainer counts as a taker of small ops from memory, so the submitting thread starts a drainer
# only once four wait for every one), three alternating rounds: 4 KiB and 1 MiB reads 64 in flight beside the
# plain loop, one 4 KiB read at a time beside the plain loop, and 4 KiB from 16 threads (ferry-mt); then hot 8 GiB
# staged reads of this tree against the copy ceiling. Release builds of the probes without the Python package.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/final"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
pack() { cp build-gpu/out/build.log "$o/suites-build.log" 2>/dev/null; tar czf "$OUT/final.tgz.part" -C "$o" . && mv "$OUT/final.tgz.part" "$OUT/final.tgz"; }
f=big-8GiB.bin
( [ -f $f ] || head -c 8G /dev/urandom > $f ) &
timeout 200 scripts/gpu-bounded.sh "195:build" > "$o/suites-build.txt" 2>&1
# The patched copy of this tree, and both probes built alike.
mkdir -p /tmp/busy && tar cf - --exclude=./build-gpu --exclude=./.device-deps --exclude="./build-*" --exclude="./$f" . |
  tar xf - -C /tmp/busy && (cd /tmp/busy && { patch -p1 < lab/results/pending-final/busy-drainers-take.patch || git apply lab/results/pending-final/busy-drainers-take.patch; } && grep -c 'counts as a taker' src/engine/queue.cpp) > "$o/patch.log" 2>&1
for t in tree:. busy:/tmp/busy; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-p$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-p$name" -j 8 --target ferry_bench ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
pack
timeout 130 build-gpu/tests/ferry_gpu_tests > "$o/gpu-tests.log" 2>&1; echo "exit $?" >> "$o/gpu-tests.log"; pack
sync
cat $f > /dev/null
echo "built, C++ GPU tests and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
sr() { find "build-p$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2 3; do
  order="tree busy"; [ $round = 2 ] && order="busy tree"
  for t in $order; do
    [ $(( $(date +%s) - start )) -gt 330 ] && break 2
    timeout 60 "$(sr $t)" $f --sizes 4KiB,1MiB --modes ferry,plain --bytes-per-mode 256MiB > "$o/$t-singles-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > "$o/$t-one-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 4KiB --modes ferry-mt --bytes-per-mode 256MiB > "$o/$t-mt-$round.txt" 2>&1
  done
done
bench=$(find build-ptree -name ferry-bench -type f | head -1)
timeout 60 "$bench" $f --size 8GiB --cache hot --repeats 3 --routes staged --baselines copy \
  --json-out "$o/tree-hot8.json" > "$o/tree-hot8.txt" 2>&1
pack
left=$((585 - ($(date +%s) - start)))
[ $left -gt 60 ] && timeout $left scripts/gpu-bounded.sh "$((left - 5)):pytest-gpu" > "$o/pytest.txt" 2>&1
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
pack
