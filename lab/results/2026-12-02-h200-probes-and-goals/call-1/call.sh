#!/bin/bash
# Call 1 of 2026-12-02 late (untracked): probes of the per-request and per-copy costs (plain-calls,
# plain-combined, ferry-mt at 1 and 4 in flight a thread), issue 21's goals, and the A/B against d7cbac4.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
log() { echo "== $(date -u +%T) $*"; }
log start
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF > $o/cmake.log 2>&1 &&
  cmake --build build-gpu -j 12 --target ferry_small_reads ferry_cli ferry_bench ferry_copy_contention > $o/build.log 2>&1; echo "new build rc=$?"; tail -3 $o/build.log ) &
( cmake -S .old-d7 -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_BUILD_TESTS=OFF > $o/old-cmake.log 2>&1 &&
  cmake --build build-old -j 4 --target ferry_cli > $o/old-build.log 2>&1; echo "old build rc=$?"; tail -3 $o/old-build.log ) &
wait
log built
sr=build-gpu/tests/ferry_small_reads
mkdir -p build-gpu/data; f=build-gpu/data/small-4GiB.bin
[ -f $f ] || build-gpu/cli/ferry write $f --size 4GiB --no-sync > /dev/null
cat $f > /dev/null
for pass in 1 2; do
  timeout 60 $sr $f --sizes 4KiB,64KiB --bytes-per-mode 512MiB --modes plain,plain-calls,plain-combined,ferry-mt \
    --json-out $o/probe-$pass.json > $o/probe-$pass.txt 2>&1; echo "probe rc=$?"; cat $o/probe-$pass.txt
  timeout 30 $sr $f --sizes 4KiB --bytes-per-mode 512MiB --in-flight 16 --modes ferry-mt \
    --json-out $o/probe-mt16-$pass.json > $o/probe-mt16-$pass.txt 2>&1; tail -1 $o/probe-mt16-$pass.txt
  timeout 30 $sr $f --sizes 4KiB --latency-requests 8000 --modes plain-1,plain-calls-1,ferry-1 \
    --json-out $o/probe-one-$pass.json > $o/probe-one-$pass.txt 2>&1; tail -3 $o/probe-one-$pass.txt
done
log probes done
OUT= timeout 200 bash scripts/gpu-session.sh small-reads-goals 2>&1 | grep -v "^== .* machine" | tail -40
log goals done
OUT= OLD_FERRY=build-old/cli/ferry AB_SIZES="1GiB 8GiB" timeout 100 bash scripts/gpu-session.sh ab 2>&1 | tail -12
log ab done
g=build-gpu/data/first-1GiB.bin; [ -f $g ] || build-gpu/cli/ferry write $g --size 1GiB --no-sync > /dev/null
for round in 1 2; do for which in old new; do
  b=build-gpu/cli/ferry; [ $which = old ] && b=build-old/cli/ferry
  timeout 40 python3 bench/first_read.py $b $g --repeats 5 --policies auto > $o/first-read-$which-$round.jsonl 2> $o/first-read-$which-$round.txt
  echo "first read $which round $round: $(tail -2 $o/first-read-$which-$round.txt | tr '\n' ' ')"
done; done
log end
tar czf $OUT/r1.tgz -C build-gpu out
