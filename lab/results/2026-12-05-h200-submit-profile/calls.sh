#!/usr/bin/env bash
# Written 2026-12-05 (third session of the day). Carry .device-deps, .old-tree (git archive 189e30e, as in
# lab/results/2026-12-05-h100-small-ops/calls.sh) and .perf-closure (Debian 12's perf and its libraries).
# 1. Where one thread's 4 KiB reads in flight (64) spend their time, this tree against 189e30e. The submitter's
#    pread() took 4-6 us on the H100 against 1.3-1.7 for 189e30e, and at 4 KiB a read that alone caps the row
#    at about 0.8 GB/s. Both probes built side by side (Release, -g); two alternating rounds of the row and the
#    plain loop; then each under perf with DWARF call graphs: every context switch (where the submitting thread
#    sleeps, and on what) and a CPU profile, folded for the submitting thread by fold.py.
#    Two more trees, this one with the queue of chain/ or fair/ (chain.patch, fair.patch): a one-op push starts
#    no drainer while a drainer runs a take of small ops from memory or stays for more (it is back within
#    microseconds), and a drainer that takes ops and sees more waiting starts the next itself, so the wakes
#    leave the submitting thread. chain takes a share of what waits among the drainers free now (often all of
#    it: few drainers, large takes); fair among the drainers the ops want (kSmallOpsPerDrainer to a drainer,
#    the others started by it). On the CPU machine (2 cores) neither can be judged: there HEAD too mostly runs
#    one drainer, and fair's extra drainers cost; a unit test with reads of 2 ms (SlowReadsInFlightFromOneThread-
#    SpreadOverTheWorkers, in fair's tree) saw 2-4 reads at once with chain, 3-5 with fair and 4 with HEAD.
set -uo pipefail
source .device-deps/gpu-env.sh
here=lab/results/2026-12-05-h200-submit-profile
perf=(env LD_LIBRARY_PATH=.perf-closure/lib:$LD_LIBRARY_PATH .perf-closure/perf)
case "${1:-}" in
  1|2) o="$OUT/perf"; mkdir -p "$o"
     { nvidia-smi -L; nproc; cat /proc/sys/kernel/perf_event_paranoid; } > "$o/machine.txt" 2>&1
     if [ "$1" = 1 ]; then  # 2: the trees built by call 1 on this machine, measured again
     for v in chain fair; do
       mkdir -p .v-$v && tar c --exclude='./build*' --exclude='./.v-*' --exclude=./.old-tree --exclude=./.device-deps \
         --exclude=./.perf-closure --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-$v &&
         cp "$here"/$v/queue.cpp "$here"/$v/queue.hpp .v-$v/src/engine/ || exit 1
     done
     for t in new:. chain:.v-chain fair:.v-fair old:.old-tree; do
       ( cmake -S "${t#*:}" -B "build-p${t%%:*}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF \
           -DFERRY_REMOTE=OFF -DCMAKE_CXX_FLAGS=-g > "$o/${t%%:*}-cmake.log" 2>&1 &&
         cmake --build "build-p${t%%:*}" -j 6 --target ferry_small_reads > "$o/${t%%:*}-build.log" 2>&1 ) &
     done
     wait
     fi
     [ -f small-2GiB.bin ] || head -c 2G /dev/urandom > small-2GiB.bin
     probe() { find "build-p$1" -name ferry_small_reads -type f | head -1; }
     for round in 1 2; do
       for t in new chain fair old; do
         timeout 60 "$(probe $t)" small-2GiB.bin --sizes 4KiB,64KiB --modes ferry,ferry-mt,ferry-1,plain,batch --bytes-per-mode 512MiB \
           > "$o/$t-rows-$round.txt" 2>&1
       done
     done
     for t in new fair old; do
       for what in cs cpu; do
         if [ $what = cs ]; then event=(-e cs -c 1) bytes=32MiB; else event=(-F 4999) bytes=256MiB; fi
         timeout 90 "${perf[@]}" record "${event[@]}" --call-graph dwarf,8192 -o "perf-$t-$what.data" "$(probe $t)" \
           small-2GiB.bin --sizes 4KiB --modes ferry --bytes-per-mode $bytes > "$o/$t-$what-run.txt" 2>&1
         timeout 50 "${perf[@]}" script -i "perf-$t-$what.data" -F tid,ip,sym 2>/dev/null |
           python3 "$here/fold.py" "" 40 > "$o/$t-$what-submitter.txt" 2>&1
         timeout 60 "${perf[@]}" report -i "perf-$t-$what.data" --stdio --no-children --sort pid -g none \
           > "$o/$t-$what-threads.txt" 2>&1
       done
       timeout 60 "${perf[@]}" report -i "perf-$t-cpu.data" --stdio --no-children --percent-limit 0.3 \
         --sort dso,symbol -g none > "$o/$t-cpu-flat.txt" 2>&1
     done
     tar czf "$OUT/perf.tgz" -C "$o" . && rm -rf "$o" ;;  # one file: a call brings back only a few
  3) # (Ran on an H100: bench/results/2026-12-05-h100-spinning-lock.)
     # This tree with the op queue's lock a spinning (adaptive) mutex, against the tree it changes (.base-tree,
     # carried: git archive HEAD) and 189e30e: calls 1-2 found the submitting thread asleep on that lock (80% of
     # its context switches, 0.35 a read). Three alternating rounds, no profile.
     o="$OUT/spin"; mkdir -p "$o"
     { nvidia-smi -L; nproc; } > "$o/machine.txt" 2>&1
     for t in spin:. base:.base-tree old:.old-tree; do
       ( cmake -S "${t#*:}" -B "build-s${t%%:*}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF \
           -DFERRY_REMOTE=OFF > "$o/${t%%:*}-cmake.log" 2>&1 &&
         cmake --build "build-s${t%%:*}" -j 6 --target ferry_small_reads > "$o/${t%%:*}-build.log" 2>&1 ) &
     done
     wait
     [ -f small-2GiB.bin ] || head -c 2G /dev/urandom > small-2GiB.bin
     for round in 1 2 3; do
       for t in spin base old; do
         timeout 60 "$(find "build-s$t" -name ferry_small_reads -type f | head -1)" small-2GiB.bin --sizes 4KiB,64KiB \
           --modes ferry,ferry-mt,ferry-1,plain,batch --bytes-per-mode 512MiB > "$o/$t-rows-$round.txt" 2>&1
       done
     done
     tar czf "$OUT/spin.tgz" -C "$o" . && rm -rf "$o" ;;
  *) echo "usage: $0 1|2|3"; exit 2 ;;
esac
