#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine, for the next session: apply counted-busy.patch to main and commit it first; ran 2026-12-06 on an H100 (it ran as lab/results/pending-counted-busy)
# this script then tests that commit. Carry .device-deps. Issue 50: one thread's small reads start a drainer
# (a wake, about 6 us of the submitter's time on the GPU machine's guest: 2026-12-06-h100-spread) far less often.
# The change counts a busy drainer as a taker of small ops from memory, and counts the pushes still on the stack
# as waiting. Busy drainers alone (2026-12-06-h100-busy, 79f7d2e) gave one thread's 4 KiB reads 1.03-1.42x but were
# reverted: a push read a stale waiting count, so slow reads spread over too few drainers under ThreadSanitizer.
# With the pushes counted, Queue.SlowReadsInFlightFromOneThreadSpreadOverTheWorkers passed 12 runs of 12 under
# ThreadSanitizer on the CPU machine, and the patch's test passes too.
# (1) The GPU suites on this tree: the full build with the Python package, the C++ GPU tests, the Python GPU tests
# last with the time left. (2) Alternating rounds of this tree ("cb") and this tree without the patch ("tree",
# patch -R): 4 KiB reads 64 in flight from one thread beside the plain loop, 4 KiB from 16 threads, one 4 KiB read
# at a time beside the plain loop. Judge by the medians of the rounds: one round says more about the machine.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/cb"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
pack() { cp -r build-gpu/out "$o/gpu-out" 2>/dev/null; tar czf "$OUT/cb.tgz.part" -C "$o" . && mv "$OUT/cb.tgz.part" "$OUT/cb.tgz"; }
f=hot-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
mkdir -p /tmp/tree && tar cf - --exclude=./.device-deps --exclude="./build*" --exclude="./$f" . | tar xf - -C /tmp/tree
(cd /tmp/tree && patch -p1 -R < lab/results/pending-counted-busy/counted-busy.patch) > "$o/patch.log" 2>&1
for t in cb:. tree:/tmp/tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-c$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-c$name" -j 3 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
timeout 200 scripts/gpu-bounded.sh "195:build" > "$o/suites-build.txt" 2>&1
wait
pack
timeout 110 build-gpu/tests/ferry_gpu_tests > "$o/gpu-tests.log" 2>&1; echo "exit $?" >> "$o/gpu-tests.log"; pack
sync
cat $f > /dev/null
echo "built, C++ GPU tests and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
sr() { find "build-c$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2 3 4 5 6 7 8; do
  order="cb tree"; [ $((round % 2)) = 0 ] && order="tree cb"
  for t in $order; do
    [ $(( $(date +%s) - start )) -gt 330 ] && break 2
    timeout 30 "$(sr $t)" $f --sizes 4KiB --modes ferry,plain --bytes-per-mode 256MiB > "$o/$t-singles-$round.txt" 2>&1
    timeout 30 "$(sr $t)" $f --sizes 4KiB --modes ferry-mt --bytes-per-mode 256MiB > "$o/$t-mt-$round.txt" 2>&1
    timeout 30 "$(sr $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > "$o/$t-one-$round.txt" 2>&1
  done
  pack
done
left=$((585 - ($(date +%s) - start)))
[ $left -gt 60 ] && timeout $left scripts/gpu-bounded.sh "$((left - 5)):pytest-gpu" > "$o/pytest.txt" 2>&1
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
pack
