#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps and .old-tree (git archive 189e30e).
# Every drainer that finds the queue empty after a take of one-op requests may stay (stay-all.patch), not only the
# first: up to the cores left beside the submitting thread and the drainers at work, each for 50 us from when it
# found the queue empty, staying on when another drainer took what woke it. After the lock-free push
# (bench/results/2026-12-06-h100-lock-free-push) one thread's 4 KiB reads in flight still ran at 0.53x the plain loop
# with 0.28 voluntary context switches a read (189e30e 0.09): perhaps drainers that left and were started again, each start a
# wake on the submitting thread. A warning from 2026-12-05 (bench/NOTES.md): sharing 64 reads to a drainer cut
# the starts there without lifting the row; this keeps the drainers many. Read the new pool-job and gathered-op
# figures under each row either way. On the CPU machine (2 cores) no drainer stays; with the cores check forced to 16 (a
# scratch edit, not in the patch) the unit tests pass (637, 2 skipped), and under ThreadSanitizer the queue, batch,
# pinned-budget and stress tests (44, no report). Not run on a GPU: the session's device time was spent
# (bench/results/2026-12-06-h100-lock-free-push). About 5 minutes of device time after the machine's start; land a
# variant only if one thread's 4 KiB and 64 KiB rows rise and the others hold, then the goals as in that record's then.sh 2-4.
# take4.patch, the other lead: a take of small one-op reads from memory holds at least as many ops as push() counts a
# drainer for (4), where today a take's share is the ops waiting over the free drainers, one op when many are free,
# each then paying a kit and a copy wait of its own. Unit tests pass (637, 2 skipped).
# Builds ferry_small_reads of four trees (stay, take4, this tree, 189e30e) and the variants' ferry_gpu_tests; two
# alternating rounds of the small-read rows; then both variants' C++ GPU tests (about 40 s each). The archive is
# written after each round.
set -uo pipefail
source .device-deps/gpu-env.sh
here=lab/results/2026-12-06-h100-small-takes  # was pending-small-takes when it ran
o="$OUT/stay"; mkdir -p "$o"
{ nvidia-smi -L; nproc; git log --oneline -1; } > "$o/machine.txt" 2>&1
for v in stay take4; do
  mkdir -p .v-$v && tar c --exclude='./build*' --exclude='./.v-*' --exclude=./.old-tree --exclude=./.device-deps \
    --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-$v &&
    git apply --directory=.v-$v "$here/$( [ $v = stay ] && echo stay-all || echo take4 ).patch" || exit 1
done
for t in stay:.v-stay take4:.v-take4 base:. old:.old-tree; do
  targets=ferry_small_reads
  case ${t%%:*} in stay|take4) targets="ferry_small_reads ferry_gpu_tests" ;; esac
  ( cmake -S "${t#*:}" -B "build-s${t%%:*}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF \
      -DFERRY_REMOTE=OFF > "$o/${t%%:*}-cmake.log" 2>&1 &&
    cmake --build "build-s${t%%:*}" -j 4 --target $targets > "$o/${t%%:*}-build.log" 2>&1 ) &
done
[ -f small-2GiB.bin ] || head -c 2G /dev/urandom > small-2GiB.bin
wait
pack() { tar czf "$OUT/stay.tgz.part" -C "$o" . && mv "$OUT/stay.tgz.part" "$OUT/stay.tgz"; }
for round in 1 2; do
  for t in stay take4 base old; do
    timeout 40 "$(find "build-s$t" -name ferry_small_reads -type f | head -1)" small-2GiB.bin --sizes 4KiB,64KiB,1MiB \
      --modes ferry,ferry-mt,ferry-1,plain,plain-1,batch --bytes-per-mode 512MiB > "$o/$t-rows-$round.txt" 2>&1
  done
  pack
done
for v in stay take4; do timeout 90 build-s$v/tests/ferry_gpu_tests > "$o/$v-gpu-tests.log" 2>&1; pack; done
pack
