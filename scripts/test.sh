#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test (C++ unit and fault
# tests, CLI tests, the Python suite; GPU tests run where a GPU is usable and otherwise skip, saying why).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build=${FERRY_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "$@"
