#!/bin/bash
# Call H3: why one read at a time measured 11.7 us at 4 KiB in the goals' process (ferry-1 first in a fresh
# process) but 9.7-10.2 in H1's A/B process (after the in-flight modes). Same build as H1 (52ad69d's library),
# alternating: a fresh process with the one-at-a-time modes only; one that runs the in-flight mode first; one
# with a pool of one thread.
set -u
source .device-deps/gpu-env.sh
scripts/gpu-session.sh build 2>&1 | tail -1
sr=build-gpu/tests/ferry_small_reads
f=$(ls build-gpu/data/small-4GiB.bin 2>/dev/null || true)
[ -n "$f" ] || { f=build-gpu/data/small-4GiB.bin; build-gpu/cli/ferry write $f --size 4GiB --no-sync > /dev/null; sync; }
cat $f > /dev/null
for r in 1 2 3; do
  $sr $f --sizes 4KiB,64KiB --modes ferry-1,plain-1 > $OUT/fresh-$r.txt 2>&1
  $sr $f --sizes 4KiB,64KiB --bytes-per-mode 64MiB --modes ferry,ferry-1,plain-1 > $OUT/after-in-flight-$r.txt 2>&1
  $sr $f --sizes 4KiB,64KiB --threads 1 --modes ferry-1,plain-1 > $OUT/one-thread-$r.txt 2>&1
done
for k in fresh after-in-flight one-thread; do
  for r in 1 2 3; do
    awk -v k=$k -v r=$r '/ferry-1|plain-1/ {printf "%-16s %d %-9s %-8s %s us\n", k, r, $1" "$2, $3, $7}' $OUT/$k-$r.txt
  done
done
