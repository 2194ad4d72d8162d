#!/usr/bin/env bash
# Configures and builds Ferry (library, CLI, tests, Python module) into ${FERRY_BUILD_DIR:-build}.
# With TARGET arguments only those are built (scripts/run.sh builds only the CLI, `ferry_cli`); the build
# directory is the same, so a later full build reuses what they compiled.
# Usage: scripts/build.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build=${FERRY_BUILD_DIR:-build}
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${FERRY_BUILD_TYPE:-RelWithDebInfo} \
  -DFERRY_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python" ${FERRY_CMAKE_ARGS:-} >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
