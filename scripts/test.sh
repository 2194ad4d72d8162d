#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test (C++ unit, fault and
# regression tests, CLI tests, the Python suite; GPU tests run where a GPU is usable and otherwise skip,
# saying why), then the CPU tests again under ThreadSanitizer (the tsan preset).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build=${FERRY_BUILD_DIR:-build}
jobs=$(nproc)
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
echo "== ThreadSanitizer: the CPU tests with the fake CUDA driver and cuFile (build-tsan)"
cmake --preset tsan > /dev/null
cmake --build --preset tsan -j "$jobs"
ctest --preset tsan -j "$jobs"
