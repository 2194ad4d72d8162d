#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-pool-hand-on). Carry .device-deps. The session's last device time (about 250 s with the
# machine's start): the pool passes on what a taking worker leaves (a wake, or one more worker), and a drainer
# that turns busy starts drainers for what waits. First the GPU stress tests, then one thread's small reads beside
# the plain loop, then the whole C++ GPU suite with whatever time is left.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/hand"; mkdir -p "$o"
{ nvidia-smi -L; nproc; grep -c "ready jobs, whose submit" src/engine/thread_pool.cpp; } > "$o/machine.txt" 2>&1
pack() { tar czf "$OUT/hand.tgz.part" -C "$o" . && mv "$OUT/hand.tgz.part" "$OUT/hand.tgz"; }
f=small-1GiB.bin
( [ -f $f ] || head -c 1G /dev/urandom > $f ) &
cmake -S . -B build-h -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > "$o/cmake.log" 2>&1 &&
  cmake --build build-h -j 16 --target ferry_gpu_tests ferry_small_reads > "$o/build.log" 2>&1 || { tail -20 "$o/build.log"; exit 1; }
wait
pack
timeout 60 build-h/tests/ferry_gpu_tests --gtest_filter='Issue9Gpu.Stress*' > "$o/stress.log" 2>&1; pack
sr=$(find build-h -name ferry_small_reads -type f | head -1)
cat $f > /dev/null
timeout 30 "$sr" $f --sizes 4KiB,64KiB --modes ferry,ferry-mt,plain --bytes-per-mode 256MiB > "$o/rows.txt" 2>&1
timeout 20 "$sr" $f --sizes 4KiB --modes ferry-1,plain-1 --bytes-per-mode 32MiB --latency-requests 4000 > "$o/one.txt" 2>&1
pack
timeout 150 build-h/tests/ferry_gpu_tests --gtest_filter='-Issue9Gpu.Stress*' > "$o/gpu-tests.log" 2>&1; pack
