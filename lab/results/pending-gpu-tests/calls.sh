#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine; NOT RUN yet. Carry .device-deps. The C++ GPU tests after a request whose
# backend shares no workers (cuFile) gets its own queue from FileState::queue_for: a Release build without the
# Python package (the device time left does not hold the Python suite), then ferry_gpu_tests.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/gpu-tests"; mkdir -p "$o"
{ nvidia-smi -L; nproc; } > "$o/machine.txt" 2>&1
start=$(date +%s)
cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
  -DFERRY_BUILD_TESTS=ON > "$o/cmake.log" 2>&1 &&
  cmake --build build-t -j 16 --target ferry_gpu_tests > "$o/build.log" 2>&1 || tail -20 "$o/build.log"
echo "built after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
timeout 150 "$(find build-t -name ferry_gpu_tests -type f | head -1)" > "$o/gpu-tests.log" 2>&1
echo "exit $?" >> "$o/gpu-tests.log"
rm -f "$o/build.log"
