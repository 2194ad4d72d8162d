#!/usr/bin/env bash
# The README's run command: builds the library and the CLI only (no tests, no Python module: the test
# command builds those in the same build directory), then reads FILE (default: a generated 1 GiB sample)
# with `ferry read --verify` and prints the throughput and route report. Extra arguments go to `ferry read`,
# e.g. scripts/run.sh big.bin --device 0.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh ferry_cli >/dev/null
build=${FERRY_BUILD_DIR:-build}
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
