#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps, .old-tree (git archive 189e30e) and .perf-deps (Debian's
# perf, its libraries and libglib2.0-0, which the GPU machine lacks; jemalloc: .deb files unpacked here).
# The submit-cost call (bench/results/2026-12-06-h100-submit-cost) found jemalloc preloaded worth 1.20-1.55x on one
# thread's 4 KiB reads in flight: blocks the submitting thread allocated were freed by drainers (the route backend
# at completion, the push's stack node), 1.54 a request, and blocks drainers allocated were freed by the submitter
# (the request's reasons), 0.99; glibc gives a block back to its maker's arena under that arena's lock.
# crossings.patch leaves 0.03 and 0.01 (lab/alloc_crossings.cpp on the CPU machine, ferry_submit_profile 20000 64
# 16): the push node lives in the request, a backend lets go of the File at completion and its memory goes with
# the request, the request's reasons get their room on the submitting thread. Unit tests pass (635, 2 skipped),
# ThreadSanitizer on the queue, batch, budget, stress, request, file, scatter, route and fork tests (117) reports
# nothing, the Python suite passes (642, 120 skipped). On the 2-core CPU machine (fake GPU, ferry_submit_profile
# 100000 64 16, three alternating runs against b811e80) the submitter spent 1.02-1.24 us in pread() a request
# against 1.27-1.34, the process 5.9-6.3 us of CPU against 6.5-8.4. This call:
#  - times crossings against this tree, 189e30e and both trees with jemalloc preloaded (if crossings reaches
#    base-je, the allocator's share is explained), and crossings with a File's uses counted without a lock
#    (cu: lab/results/2026-12-06-h100-submit-cost/uses.patch, 1.07x alone there), two alternating rounds;
#  - profiles the submitting thread of crossings and of 189e30e (perf, cpu-clock, frame pointers);
#  - runs crossings' C++ GPU tests.
# Land crossings if one thread's 4 and 64 KiB rows rise and the others hold; then the goals as in
# lab/results/2026-12-06-h100-lock-free-push/then.sh 2-4. About 5 minutes after the machine's start.
set -uo pipefail
source .device-deps/gpu-env.sh
here=lab/results/2026-12-06-h200-fewer-crossings  # was pending-fewer-crossings when it ran
o="$OUT/cross"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
mkdir -p /tmp/pd && for f in .perf-deps/*.deb; do dpkg -x "$f" /tmp/pd; done
pd_libs=/tmp/pd/usr/lib/x86_64-linux-gnu:/tmp/pd/lib/x86_64-linux-gnu
perf() { LD_LIBRARY_PATH=$pd_libs:${LD_LIBRARY_PATH:-} /tmp/pd/usr/bin/perf "$@"; }
jemalloc=/tmp/pd/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
for v in crossings cu; do
  mkdir -p .v-$v && tar c --exclude='./build*' --exclude='./.v-*' --exclude=./.old-tree --exclude=./.device-deps \
    --exclude=./.perf-deps --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-$v &&
    git apply --directory=.v-$v "$here/crossings.patch" || exit 1
done
git apply --directory=.v-cu lab/results/2026-12-06-h100-submit-cost/uses.patch || exit 1
fp="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"
for t in crossings:.v-crossings:"" cu:.v-cu:"" base:.:"" old:.old-tree:"" crossingsfp:.v-crossings:"$fp" oldfp:.old-tree:"$fp"; do
  IFS=: read -r name dir flags <<< "$t"
  ( cmake -S "$dir" -B "build-c$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DCMAKE_CXX_FLAGS="$flags" > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-c$name" -j "$( [ "$name" = crossings ] && echo 6 || echo 2 )" --target ferry_small_reads \
      $( [ "$name" = crossings ] && echo ferry_gpu_tests ) > "$o/$name-build.log" 2>&1 ) &
done
[ -f small-2GiB.bin ] || head -c 2G /dev/urandom > small-2GiB.bin
wait
pack() { tar czf "$OUT/cross.tgz.part" -C "$o" . && mv "$OUT/cross.tgz.part" "$OUT/cross.tgz"; }
tool() { find "build-c$1" -name ferry_small_reads -type f | head -1; }
perf --version > "$o/perf-version.txt" 2>&1
for round in 1 2; do
  for t in crossings cu base old crossings-je base-je; do
    pre=""; b=$t
    case $t in *-je) pre=$jemalloc; b=${t%-je} ;; esac
    LD_PRELOAD=$pre timeout 40 "$(tool $b)" small-2GiB.bin --sizes 4KiB,64KiB,1MiB --modes ferry,ferry-mt,plain \
      --bytes-per-mode 512MiB > "$o/$t-rows-$round.txt" 2>&1
  done
  pack
done
timeout 90 build-ccrossings/tests/ferry_gpu_tests > "$o/crossings-gpu-tests.log" 2>&1
pack
# The submitting (main) thread's profile: its thread id is the process's.
for t in crossingsfp oldfp; do
  perf record -e cpu-clock -F 20000 -g -o "/tmp/$t.data" -- "$(tool $t)" small-2GiB.bin --sizes 4KiB --modes ferry \
    --bytes-per-mode 512MiB > "$o/$t-profiled-rows.txt" 2>&1
  pid=$(perf script -i "/tmp/$t.data" -F pid 2>/dev/null | head -1 | tr -d ' ')
  perf report -i "/tmp/$t.data" --sort pid --stdio -g none 2>/dev/null | grep -v "^#" | grep . | head -20 > "$o/$t-threads.txt"
  perf report -i "/tmp/$t.data" --tid "$pid" --no-children --sort dso,sym --stdio -g none --percent-limit 0.3 \
    2>/dev/null | head -90 > "$o/$t-submitter-flat.txt"
  perf report -i "/tmp/$t.data" --tid "$pid" --children --sort sym --stdio -g none --percent-limit 1 2>/dev/null \
    | head -90 > "$o/$t-submitter-inclusive.txt"
  perf report -i "/tmp/$t.data" --tid "$pid" --no-children --sort sym --stdio -g graph,1,callee,function,percent \
    --percent-limit 2 2>/dev/null | head -400 > "$o/$t-submitter-chains.txt"
  pack
done
