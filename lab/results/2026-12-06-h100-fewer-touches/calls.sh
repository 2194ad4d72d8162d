#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps and .old-tree (git archive 189e30e).
# The fewer-crossings call (bench/results/2026-12-06-h200-fewer-crossings) left one thread's 4 KiB reads in flight
# at 1.29-1.43 GB/s against 189e30e's 1.87-2.17, its submitter at 2.1-2.2 us a request against 1.3. What the
# submitter still wrote on cache lines the workers write too, every request: the File's use count and its lock
# (ended by the worker), the lock beside the workers' report lock (false sharing), the FileState's and the
# source's reference counts (a weak reference and a source copy for the completion, dropped by the worker), and
# the newest device request's reference count (a weak lock on every route lookup). This tree:
#  - touches.patch: uses counted begun and ended apart on lines of their own, the process part's groups on lines of
#    their own, the completion holding no references (the Use keeps the FileState, as ~File waits for it);
#  - held.patch: the newest device request held, not watched.
# On the CPU machine (fake GPU, ferry_submit_profile 100000 64 16) the submitter spent 0.86-0.91 us in pread()
# with touches against 1.02-1.24 before. This call times base (neither), touches, held (the tree) and 189e30e in
# two alternating rounds, with one 4 KiB read at a time beside the plain loop, then runs the tree's C++ and
# Python GPU tests (these last with what is left of 10 minutes). Land what lifts one thread's 4 and 64 KiB rows
# with the others level. About 9 minutes.
set -uo pipefail
source .device-deps/gpu-env.sh
here=lab/results/2026-12-06-h100-fewer-touches  # was pending-fewer-touches when it ran
o="$OUT/touch"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; git log --oneline -1; grep -c uses_begun src/file/file_state.hpp; } > "$o/machine.txt" 2>&1
for v in base touches; do
  mkdir -p .v-$v && tar c --exclude='./build*' --exclude='./.v-*' --exclude=./.old-tree --exclude=./.device-deps \
    --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-$v &&
    git apply -R --directory=.v-$v "$here/held.patch" || exit 1
done
git apply -R --directory=.v-base "$here/touches.patch" || exit 1
for t in base:.v-base touches:.v-touches old:.old-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-t$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      > "$o/$name-cmake.log" 2>&1 && cmake --build "build-t$name" -j 3 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ) &
done
# The tree itself: the full build (Python package included) that the GPU tests use.
timeout 300 scripts/gpu-bounded.sh "290:build" > "$o/held-build.txt" 2>&1
wait
f=small-2GiB.bin
[ -f $f ] || head -c 2G /dev/urandom > $f
cat $f > /dev/null
pack() { cp -r build-gpu/out "$o/gpu-out" 2>/dev/null; tar czf "$OUT/touch.tgz.part" -C "$o" . && mv "$OUT/touch.tgz.part" "$OUT/touch.tgz"; }
tool() { [ "$1" = held ] && echo build-gpu/lab/ferry_small_reads || find "build-t$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2; do
  for t in base touches held old; do
    timeout 40 "$(tool $t)" $f --sizes 4KiB,64KiB,1MiB --modes ferry,ferry-mt,plain --bytes-per-mode 512MiB \
      > "$o/$t-rows-$round.txt" 2>&1
    timeout 30 "$(tool $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --bytes-per-mode 64MiB --latency-requests 8000 \
      > "$o/$t-one-$round.txt" 2>&1
  done
  pack
done
timeout 120 build-gpu/tests/ferry_gpu_tests > "$o/held-gpu-tests.log" 2>&1
pack
left=$((580 - SECONDS))
[ $left -gt 30 ] && timeout $left scripts/gpu-bounded.sh "$((left - 5)):pytest-gpu" > "$o/held-pytest.txt" 2>&1
pack
