#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps, .old-tree (git archive 189e30e) and .perf-deps (Debian's
# perf and its libraries, jemalloc: .deb files unpacked here).
# The small-takes call of this morning (lab/results/2026-12-06-h100-small-takes) showed one thread's small reads in
# flight bound by the submitting thread: 2.6 us in pread() a 4 KiB request (189e30e 1.2-1.4), whatever the drainers
# did (stay-all cut pool jobs to 0.01 a request, take4 took 4 ops together: the row stayed at 1.2-1.4 GB/s against
# 189e30e's 2.1-2.3). Where do those microseconds go? This call:
#  - profiles the submitting thread (perf, cpu-clock, frame pointers) of this tree and of 189e30e, 4 KiB reads
#    64 in flight from one thread;
#  - times this tree with the queue's shared counters each on a cache line of their own (lines.patch), and both
#    trees with jemalloc preloaded (does the allocator's cross-thread free cost the submitter?), in two
#    alternating rounds, and with a File's uses counted without a lock (uses.patch: the submitter took that lock
#    for every request and a drainer for every completion), and both; then both's C++ GPU tests.
set -uo pipefail
source .device-deps/gpu-env.sh
here=lab/results/2026-12-06-h100-submit-cost  # was pending-submit-cost when it ran
o="$OUT/submit"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; cat /proc/sys/kernel/perf_event_paranoid; } > "$o/machine.txt" 2>&1
mkdir -p /tmp/pd && for f in .perf-deps/*.deb; do dpkg -x "$f" /tmp/pd; done
pd_libs=/tmp/pd/usr/lib/x86_64-linux-gnu:/tmp/pd/lib/x86_64-linux-gnu
perf() { LD_LIBRARY_PATH=$pd_libs:${LD_LIBRARY_PATH:-} /tmp/pd/usr/bin/perf "$@"; }
jemalloc=/tmp/pd/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
for v in lines uses both; do
  mkdir -p .v-$v && tar c --exclude='./build*' --exclude='./.v-*' --exclude=./.old-tree --exclude=./.device-deps \
    --exclude=./.perf-deps --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-$v &&
    git apply --directory=.v-$v "$here/$v.patch" || exit 1
done
fp="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"
for t in base:.:"" lines:.v-lines:"" uses:.v-uses:"" both:.v-both:"" old:.old-tree:"" basefp:.:"$fp" oldfp:.old-tree:"$fp"; do
  IFS=: read -r name dir flags <<< "$t"
  ( cmake -S "$dir" -B "build-p$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DCMAKE_CXX_FLAGS="$flags" > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-p$name" -j "$( [ "$name" = both ] && echo 4 || echo 2 )" --target ferry_small_reads $( [ "$name" = both ] && echo ferry_gpu_tests ) \
      > "$o/$name-build.log" 2>&1 ) &
done
[ -f small-2GiB.bin ] || head -c 2G /dev/urandom > small-2GiB.bin
wait
pack() { tar czf "$OUT/submit.tgz.part" -C "$o" . && mv "$OUT/submit.tgz.part" "$OUT/submit.tgz"; }
tool() { find "build-p$1" -name ferry_small_reads -type f | head -1; }
# The profiles first: the question this call is for.
for t in basefp oldfp; do
  perf record -e cpu-clock -F 20000 -g -o "/tmp/$t.data" -- "$(tool $t)" small-2GiB.bin --sizes 4KiB --modes ferry \
    --bytes-per-mode 512MiB > "$o/$t-profiled-rows.txt" 2>&1
  perf report -i "/tmp/$t.data" --sort pid --stdio -g none 2>/dev/null | grep -v "^#" | grep . | head -20 > "$o/$t-threads.txt"
  main=$(perf report -i "/tmp/$t.data" --sort pid --stdio -g none 2>/dev/null | grep -v "^#" | grep -o "[0-9]*:ferry_small_rea" | head -1 | cut -d: -f1)
  # The submitting (main) thread: its pid is the process's.
  pid=$(perf script -i "/tmp/$t.data" -F pid 2>/dev/null | head -1 | tr -d ' ')
  perf report -i "/tmp/$t.data" --tid "$pid" --no-children --sort sym --stdio -g none --percent-limit 0.3 2>/dev/null \
    | head -90 > "$o/$t-submitter-flat.txt"
  perf report -i "/tmp/$t.data" --tid "$pid" --children --sort sym --stdio -g none --percent-limit 1 2>/dev/null \
    | head -90 > "$o/$t-submitter-inclusive.txt"
  perf report -i "/tmp/$t.data" --tid "$pid" --no-children --sort sym --stdio -g graph,1,callee,function,percent \
    --percent-limit 2 2>/dev/null | head -400 > "$o/$t-submitter-chains.txt"
  perf report -i "/tmp/$t.data" --no-children --sort sym --stdio -g none --percent-limit 0.5 2>/dev/null \
    | head -70 > "$o/$t-all-flat.txt"
  echo "main=$main pid=$pid" >> "$o/$t-threads.txt"
  pack
done
for round in 1 2; do
  for t in base lines uses both old base-je; do
    pre=""; b=$t
    case $t in *-je) pre=$jemalloc; b=${t%-je} ;; esac
    LD_PRELOAD=$pre timeout 40 "$(tool $b)" small-2GiB.bin --sizes 4KiB,64KiB --modes ferry,ferry-mt,plain \
      --bytes-per-mode 512MiB > "$o/$t-rows-$round.txt" 2>&1
  done
  pack
done
# The C++ GPU tests of both changes together (about 40 s), should they be landed.
timeout 90 build-pboth/tests/ferry_gpu_tests > "$o/both-gpu-tests.log" 2>&1
pack
