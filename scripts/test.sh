#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test (C++ unit, fault and
# regression tests, CLI tests, the Python suite; GPU tests run where a GPU is usable and otherwise skip,
# saying why), then the CPU tests again under ThreadSanitizer (the tsan preset), then fuzzes the
# safetensors header parser for FERRY_FUZZ_SECONDS (default 30; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
source scripts/compiler-cache.sh  # for the packaging checks' builds and the ThreadSanitizer build
build=${FERRY_BUILD_DIR:-build}
jobs=$(nproc)
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
echo "== ThreadSanitizer: the CPU tests with the fake CUDA driver and cuFile (build-tsan)"
cmake --preset tsan > /dev/null
cmake --build --preset tsan -j "$jobs"
ctest --preset tsan -j "$jobs"
seconds=${FERRY_FUZZ_SECONDS:-30}
if [ "$seconds" != 0 ]; then
  log="$build/fuzz-safetensors.log"
  rc=0
  bash scripts/fuzz-safetensors.sh --seconds "$seconds" > "$log" 2>&1 || rc=$?
  if [ $rc -eq 77 ]; then
    echo "fuzz (safetensors header): skipped: $(grep skipped "$log" | tail -1)"
  elif [ $rc -ne 0 ]; then
    tail -60 "$log"
    echo "fuzz (safetensors header): FAILED (exit $rc); the input is in build-fuzz/artifacts, the log in $log"
    exit $rc
  else
    echo "fuzz (safetensors header): $(grep -E '^Done' "$log" | tail -1), no finding (log: $log)"
  fi
fi
