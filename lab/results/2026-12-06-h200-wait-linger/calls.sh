#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps. Two questions for issue 50's small-read rows, on the tip; ran 2026-12-06 on an H200 (it ran as lab/results/pending-wait-linger)
# (93a7f89's engine) in alternating rounds, each judged by the median of its rounds:
# - sync-wait.patch: a worker's finish() waits for its stream with cuStreamSynchronize (the plain loop's wait) instead
#   of polling cuStreamQuery (5 us of pauses, then yields). Does the wait's kind account for part of the 1.1-1.3 us
#   one 4 KiB read at a time takes over the loop (2026-12-06-h100-goals-tip)?
# - no-linger.patch: the last drainer to find the queue empty leaves at once. Now that busy drainers take small ops
#   (93a7f89), does staying still pay for one thread's 4 KiB reads in flight? If not, OpQueue::linger can go.
# ROUNDS_UNTIL (seconds, default 290): no round starts after it (a call with less device time left).
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/wl"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
f=hot-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
for v in sync no-linger; do
  mkdir -p /tmp/$v && tar cf - --exclude=./.device-deps --exclude="./build*" --exclude="./$f" . | tar xf - -C /tmp/$v
  p=lab/results/pending-wait-linger/$v.patch; [ $v = sync ] && p=lab/results/pending-wait-linger/sync-wait.patch
  (cd /tmp/$v && patch -p1 < $p) > "$o/$v-patch.log" 2>&1
done
for t in tip:. sync:/tmp/sync no-linger:/tmp/no-linger; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-w$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-w$name" -j 5 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
sync
cat $f > /dev/null
echo "built and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
sr() { find "build-w$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2 3 4 5 6 7 8 9 10; do
  case $((round % 3)) in 1) order="tip sync no-linger" ;; 2) order="sync no-linger tip" ;; *) order="no-linger tip sync" ;; esac
  for t in $order; do
    [ $(( $(date +%s) - start )) -gt ${ROUNDS_UNTIL:-290} ] && break 2
    timeout 30 "$(sr $t)" $f --sizes 4KiB --modes ferry,plain --bytes-per-mode 256MiB > "$o/$t-singles-$round.txt" 2>&1
    timeout 30 "$(sr $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > "$o/$t-one-$round.txt" 2>&1
  done
  tar czf "$OUT/wl.tgz.part" -C "$o" . && mv "$OUT/wl.tgz.part" "$OUT/wl.tgz"
done
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
tar czf "$OUT/wl.tgz.part" -C "$o" . && mv "$OUT/wl.tgz.part" "$OUT/wl.tgz"
