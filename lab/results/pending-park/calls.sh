#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine. Carry .device-deps. Issue 50: does a drainer's staging kit going back to the
# pool after every take that empties the queue (and a new one taken for the next) cost one thread's small reads?
# The CPU machine counts 0.77 kit cycles a 4 KiB read in flight (a pool-mutex acquire and release, a stream query
# and a context check each, on 16 drainers at once on the GPU machine). park.patch (an experiment, not for
# landing: parked kits never go back to the budget) keeps a drainer's worker in its queue when it leaves, for the
# next drainer; parkbusy adds busy-drainers-take.patch (2026-12-06-h100-final: a busy drainer counts as a taker of
# small ops). Three alternating rounds of tree, park, parkbusy: one thread's 4 KiB and 1 MiB reads 64 in flight
# beside the plain loop, one 4 KiB read at a time beside the plain loop, 4 KiB from 16 threads, 1 MiB and 64 KiB
# pieces in 64 MiB batches; and prev (prev.patch: d4fa226 undone, the set-up mark a copy of the ledger's sums as
# before) for the submitter's cost. Release builds of the probe, no Python package.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/park"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
pack() { tar czf "$OUT/park.tgz.part" -C "$o" . && mv "$OUT/park.tgz.part" "$OUT/park.tgz"; }
f=big-8GiB.bin
( [ -f $f ] || head -c 8G /dev/urandom > $f ) &
p=lab/results/pending-park
for t in prev:$p/prev.patch park:$p/park.patch parkbusy:$p/park.patch,lab/results/2026-12-06-h100-final/busy-drainers-take.patch; do
  IFS=: read -r name patches <<< "$t"
  mkdir -p /tmp/$name && tar cf - --exclude=./.device-deps --exclude="./build*" --exclude="./$f" . | tar xf - -C /tmp/$name
  for q in ${patches//,/ }; do (cd /tmp/$name && patch -p1 < "$q") >> "$o/$name-patch.log" 2>&1; done
done
for t in tree:. prev:/tmp/prev park:/tmp/park parkbusy:/tmp/parkbusy; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-p$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-p$name" -j 4 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
sync
cat $f > /dev/null
echo "built and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
pack
sr() { find "build-p$1" -name ferry_small_reads -type f | head -1; }
for round in 1 2 3; do
  order="tree prev park parkbusy"; [ $round = 2 ] && order="parkbusy park prev tree"; [ $round = 3 ] && order="park tree parkbusy prev"
  for t in $order; do
    [ $(( $(date +%s) - start )) -gt 470 ] && break 2
    timeout 60 "$(sr $t)" $f --sizes 4KiB,1MiB --modes ferry,plain --bytes-per-mode 256MiB > "$o/$t-singles-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 4KiB --modes ferry-1,plain-1 --latency-requests 8000 > "$o/$t-one-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 4KiB --modes ferry-mt --bytes-per-mode 256MiB > "$o/$t-mt-$round.txt" 2>&1
    timeout 60 "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB > "$o/$t-b64-$round.txt" 2>&1
  done
  pack
done
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
pack
