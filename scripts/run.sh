#!/usr/bin/env bash
# The README's run command: builds the library and the CLI only, then reads FILE (default: a generated 1 GiB
# sample) with `ferry read --verify` and prints the throughput and route report. Extra arguments go to
# `ferry read`, e.g. scripts/run.sh big.bin --device 0.
#
# A first run should be quick (about 3 minutes on 2 cores from a clean clone), so this build has its own
# directory, ${FERRY_RUN_BUILD_DIR:-build-run}: no tests, no Python module, and optimised without debug
# information (-O2 -DNDEBUG: about a third less compile time than -O2 -g). The test command's build
# (build/, RelWithDebInfo) is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh run
build=${FERRY_RUN_BUILD_DIR:-build-run}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_PYTHON=OFF -DFERRY_BUILD_CLI=ON ${FERRY_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$(nproc)" --target ferry_cli >/dev/null
file=${1:-}
if [ -z "$file" ] || [ "${file#-}" != "$file" ]; then
  file="$build/sample-1GiB.bin"
  if [ ! -f "$file" ]; then
    echo "generating a 1 GiB sample file: $file" >&2
    "$build/cli/ferry" write "$file" --size 1GiB >/dev/null
  fi
else
  shift
fi
exec "$build/cli/ferry" read "$file" --verify "$@"
