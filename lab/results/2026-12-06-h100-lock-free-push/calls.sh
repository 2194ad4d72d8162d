#!/usr/bin/env bash
# Written 2026-12-05 on the CPU machine; ran 2026-12-06 on an nvidia-h100-x1 (bench/results/2026-12-06-h100-lock-free-push,
# call 1; then.sh has the calls after it). Carry .device-deps and .old-tree (git archive 189e30e).
# The op queue with a lock-free push (push.patch, against 4424f3a, whose engine is main's: its queue files and a new
# unit test): a push goes onto a lock-free stack and takes the queue's lock only to start drainers; a one-op push that
# finds enough drainers counted starts none and takes no lock at all (OpQueue::drainers_will_take; a drainer that
# leaves after such a push counted it looks at the stack again). On the H100 with the spinning lock, one thread's 4
# KiB reads in flight still ran at 0.56-0.62x of 189e30e; the profile of calls 1-2 of 2026-12-05-h200-submit-profile
# had the submitting thread asleep on that lock 0.35 times a read. On the CPU machine the submitting thread's time in
# pread() fell 1.2-2x (bench/results/2026-12-05-cpu-lock-free-push). `counted.patch` is the same with the ops on the
# stack counted among those waiting when a push asks whether the drainers suffice: on the CPU machine it started as
# many drainers as this tree, and its submitting thread's time fell back to this tree's; push's gain there came from
# starting fewer. On the GPU machine, where 16 drainers often all run, both push without a lock.
# Builds the probe of four trees (push, counted, this tree, 189e30e) and push's GPU tests; two alternating rounds of
# the small-read rows, the plain loop one read at a time among them (issue 50's latency goal); then push's C++ GPU
# tests (stresses with 0 wrong bytes). The archive is written after each round, so a call cut short still brings
# back what ran. It took 266 s on the device after the machine's start. push.patch landed as 7790406, so it no
# longer applies to later trees (counted.patch neither).
set -uo pipefail
source .device-deps/gpu-env.sh
here=lab/results/2026-12-06-h100-lock-free-push  # was pending-lock-free-push when it ran
o="$OUT/push"; mkdir -p "$o"
{ nvidia-smi -L; nproc; } > "$o/machine.txt" 2>&1
for v in push counted; do
  mkdir -p .v-$v && tar c --exclude='./build*' --exclude='./.v-*' --exclude=./.old-tree --exclude=./.device-deps \
    --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-$v &&
    git apply --directory=.v-$v "$here/$v.patch" || exit 1
done
for t in push:.v-push counted:.v-counted base:. old:.old-tree; do
  targets=ferry_small_reads
  [ "${t%%:*}" = push ] && targets="ferry_small_reads ferry_gpu_tests"
  ( cmake -S "${t#*:}" -B "build-s${t%%:*}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF \
      -DFERRY_REMOTE=OFF > "$o/${t%%:*}-cmake.log" 2>&1 &&
    cmake --build "build-s${t%%:*}" -j 4 --target $targets > "$o/${t%%:*}-build.log" 2>&1 ) &
done
wait
[ -f small-2GiB.bin ] || head -c 2G /dev/urandom > small-2GiB.bin
pack() { tar czf "$OUT/push.tgz.part" -C "$o" . && mv "$OUT/push.tgz.part" "$OUT/push.tgz"; }
for round in 1 2; do
  for t in push counted base old; do
    timeout 60 "$(find "build-s$t" -name ferry_small_reads -type f | head -1)" small-2GiB.bin --sizes 4KiB,64KiB,1MiB \
      --modes ferry,ferry-mt,ferry-1,plain,plain-1,batch --bytes-per-mode 512MiB > "$o/$t-rows-$round.txt" 2>&1
  done
  pack
done
timeout 100 build-spush/tests/ferry_gpu_tests > "$o/push-gpu-tests.log" 2>&1
pack
