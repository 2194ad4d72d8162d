#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine; ran 2026-12-06 on an H100 (it ran as lab/results/pending-busy). Carry .device-deps. Issue 50: on a quiet H100 (2026-12-06-h100-spread) one
# thread's 4 KiB reads in flight followed the submitter's drainer starts round by round: 0.044 pool jobs a request
# gave 1.10x the plain loop, 0.10 gave 0.89x. This tree lands busy-drainers-take (a busy drainer counts as a taker
# of small ops from memory: 0.045 pool jobs a request on 2026-12-06-h100-final). (1) The C++ GPU tests on this tree
# (built with the Python package; the Python GPU tests only with time left over, as nothing Python changed); (2) six
# alternating rounds of this tree ("busy") and this tree without the change ("tree", without-busy.patch): 4 KiB
# reads 64 in flight from one thread beside the plain loop, 4 KiB from 16 threads, one 4 KiB read at a time beside
# the plain loop. Release builds of the probe.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/busy"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
pack() { cp -r build-gpu/out "$o/gpu-out" 2>/dev/null; tar czf "$OUT/busy.tgz.part" -C "$o" . && mv "$OUT/busy.tgz.part" "$OUT/busy.tgz"; }
f=hot-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
mkdir -p /tmp/tree && tar cf - --exclude=./.device-deps --exclude="./build*" --exclude="./$f" . | tar xf - -C /tmp/tree
(cd /tmp/tree && patch -p1 < lab/results/pending-busy/without-busy.patch) > "$o/patch.log" 2>&1
for t in busy:. tree:/tmp/tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-b$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-b$name" -j 3 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
timeout 200 scripts/gpu-bounded.sh "195:build" > "$o/suites-build.txt" 2>&1
wait
pack
timeout 110 build-gpu/tests/ferry_gpu_tests > "$o/gpu-tests.log" 2>&1; echo "exit $?" >> "$o/gpu-tests.log"; pack
sync
cat $f > /dev/null
echo "built, C++ GPU tests and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
sr() { find "build-b$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2 3 4 5 6; do
  order="busy tree"; [ $((round % 2)) = 0 ] && order="tree busy"
  for t in $order; do
    [ $(( $(date +%s) - start )) -gt 250 ] && break 2
    timeout 30 "$(sr $t)" $f --sizes 4KiB --modes ferry,plain --bytes-per-mode 256MiB > "$o/$t-singles-$round.txt" 2>&1
    timeout 30 "$(sr $t)" $f --sizes 4KiB --modes ferry-mt --bytes-per-mode 256MiB > "$o/$t-mt-$round.txt" 2>&1
    timeout 30 "$(sr $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > "$o/$t-one-$round.txt" 2>&1
  done
  pack
done
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
pack
