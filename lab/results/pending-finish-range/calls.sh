#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-fin-gpu-tests). Carry .device-deps. The C++ GPU tests on c20e925 (the staging pool's
# make_charged and route selection's reserve_staging tidied after the review; no change of behaviour meant).
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/fin"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; } > "$o/machine.txt" 2>&1
cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > "$o/cmake.log" 2>&1 &&
  cmake --build build-t -j 16 --target ferry_gpu_tests > "$o/build.log" 2>&1 || { tail -20 "$o/build.log"; exit 1; }
timeout 150 build-t/tests/ferry_gpu_tests > "$o/gpu-tests.log" 2>&1; echo "exit $?" >> "$o/gpu-tests.log"
tar czf "$OUT/fin.tgz" -C "$o" .
