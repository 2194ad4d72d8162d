#!/usr/bin/env bash
# Ran 2026-12-07 at db7f229 (the code of 7be1e93) as bench/results/2026-12-07-h100-submit-phases, after 2026-12-07-h100-final-goals in the same call (it was written as lab/results/pending-submit-phases).
# Written 2026-12-06 on the CPU machine. Carry .device-deps. Where the submitting thread's time goes in a 4 KiB
# read on the GPU machine (issue 50's small-read rows): phases.patch times the phases of File::pread and
# Future::get with the time-stamp counter and prints them at exit; the rows run as the goals run them.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/ph"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
f=hot-4GiB.bin
( [ -f $f ] || head -c 4G /dev/urandom > $f ) &
mkdir -p /tmp/ph && tar cf - --exclude=./.device-deps --exclude="./build*" --exclude="./$f" . | tar xf - -C /tmp/ph
(cd /tmp/ph && patch -p1 < lab/results/2026-12-07-h100-submit-phases/phases.patch) > "$o/patch.log" 2>&1
cmake -S /tmp/ph -B build-ph -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
  -DFERRY_BUILD_TESTS=ON > "$o/cmake.log" 2>&1 && cmake --build build-ph -j 12 --target ferry_small_reads > "$o/build.log" 2>&1 ||
  tail -20 "$o/build.log"
wait
cat $f > /dev/null
sr=$(find build-ph -name ferry_small_reads -type f | head -1)
for round in 1 2 3; do
  timeout 30 $sr $f --sizes 4KiB --modes ferry --bytes-per-mode 256MiB > "$o/singles-$round.txt" 2>&1
  timeout 30 $sr $f --sizes 4KiB --modes plain --bytes-per-mode 256MiB > "$o/plain-$round.txt" 2>&1
  timeout 30 $sr $f --sizes 4KiB --modes ferry-1 --latency-requests 8000 > "$o/one-$round.txt" 2>&1
  timeout 30 $sr $f --sizes 4KiB --modes plain-1 --latency-requests 8000 > "$o/plain-one-$round.txt" 2>&1
done
tar czf "$OUT/ph.tgz" -C "$o" .
