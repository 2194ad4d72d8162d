#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-finish-range). Carry .device-deps. The C++ GPU tests on e6e16b1 (the op queue's worker
# finish range: one finish_worker() for both of a worker's ends, its NVTX range following the set-up's).
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/fin"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > "$o/cmake.log" 2>&1 &&
  cmake --build build-t -j 16 --target ferry_gpu_tests > "$o/build.log" 2>&1 || { tail -20 "$o/build.log"; exit 1; }
timeout 150 build-t/tests/ferry_gpu_tests > "$o/gpu-tests.log" 2>&1; echo "exit $?" >> "$o/gpu-tests.log"
tar czf "$OUT/fin.tgz" -C "$o" .
