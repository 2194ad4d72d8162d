#!/usr/bin/env bash
# Configures and builds Ferry (library, CLI, tests, Python module) into ${FERRY_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh test
build=${FERRY_BUILD_DIR:-build}
# ccache (where the compiler goes through it) hashes paths under the checkout relative to the build directory,
# so that a tree laid out as this one (the unpacked sdist of scripts/check-sdist.sh) reuses these compiles.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${FERRY_BUILD_TYPE:-RelWithDebInfo} \
  -DFERRY_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python" ${FERRY_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$(nproc)"
