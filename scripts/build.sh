#!/usr/bin/env bash
# Configures and builds Ferry (library, CLI, tests, Python module) into ${FERRY_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh test
build=${FERRY_BUILD_DIR:-build}
source scripts/compiler-cache.sh
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${FERRY_BUILD_TYPE:-RelWithDebInfo} \
  -DFERRY_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python" ${FERRY_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$(nproc)"
