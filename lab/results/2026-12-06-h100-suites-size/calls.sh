#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps. The GPU suites on the session's tip (issue 50's size; ran 2026-12-06 on an H100 (it ran as lab/results/pending-final-suites, with STEPS="170:build 100:test 65:budget 135:pytest-gpu 50:pip" ROWS_UNTIL=500 TREE_COMMIT=6902001)
# pass touched the backends, stream order and the bindings): the full build with the Python package, the C++ GPU
# tests (stress included), the stresses within a 64 MiB pinned budget, the Python GPU tests, then pip install of the
# package (its bindings changed). With time left before ROWS_UNTIL (seconds, default 500): rounds of one thread's
# 4 KiB reads 64 in flight and one at a time beside the plain loop, from the suites' own build.
set -uo pipefail
source .device-deps/gpu-env.sh
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; echo "tree: ${TREE_COMMIT:-unknown}"; } > /tmp/machine.txt 2>&1
f=hot-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
scripts/gpu-bounded.sh "${STEPS:-190:build 110:test 75:budget 150:pytest-gpu 55:pip}"
wait
cat $f > /dev/null
sr=build-gpu/lab/ferry_small_reads
for round in 1 2 3 4 5 6; do
  [ $(( $(date +%s) - start )) -gt ${ROWS_UNTIL:-500} ] && break
  timeout 20 $sr $f --sizes 4KiB --modes ferry,plain --bytes-per-mode 256MiB > build-gpu/out/singles-$round.txt 2>&1
  timeout 20 $sr $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > build-gpu/out/one-$round.txt 2>&1
done
cp /tmp/machine.txt build-gpu/out/ 2>/dev/null; tar czf "$OUT/out.tgz" -C build-gpu/out .
echo "done after $(( $(date +%s) - start )) s"
