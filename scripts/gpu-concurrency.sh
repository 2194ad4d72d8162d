#!/usr/bin/env bash
# Issue 9's checks on the GPU machine, in one go: build (unless built), every GPU test (the five
# failures, the stress run on every GPU, GPU 1 while GPU 0 is current), the Python GPU tests, and
# optionally the soak in the background. Logs under $build/out (and $OUT when the device tool runs it).
# Usage, from the repository root on the GPU machine:
#   source .device-deps/gpu-env.sh; scripts/gpu-concurrency.sh [build] [tests] [soak-start MINUTES] [soak-wait]
set -uo pipefail
build=${FERRY_BUILD_DIR:-build-gpu}
out=$build/out
mkdir -p "$out"
python=$(command -v python3)
log() { echo "== $(date -u +%H:%M:%S) $*"; }
while [ $# -gt 0 ]; do
  case "$1" in
    build)
      log "build"
      pybind=$($python -m pybind11 --cmakedir 2>/dev/null || true)
      cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=ON \
        -DPython_EXECUTABLE="$python" ${pybind:+-Dpybind11_DIR=$pybind} > "$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
      cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { grep -E 'error' "$out/build.log" | head -30; exit 1; }
      ;;
    soak-start)
      minutes=$2; shift
      log "soak: $minutes minutes in the background ($out/soak.jsonl)"
      mkdir -p "$build/soak-data"
      setsid nohup "$build/tests/ferry_soak" --minutes "$minutes" --dir "$build/soak-data" --seed 5 \
        --json-out "$out/soak.jsonl" > "$out/soak.log" 2>&1 < /dev/null &
      echo $! > "$out/soak.pid"
      ;;
    tests)
      log "GPU tests (C++)"
      "$build/tests/ferry_gpu_tests" > "$out/gpu_tests.log" 2>&1
      grep -E "^\[  (FAILED|SKIPPED) |^\[==========\]|^\[  PASSED|stress on|CUFILE_FORCE|  \"" "$out/gpu_tests.log" | head -60
      log "CPU tests (ctest, unit label)"
      ctest --test-dir "$build" -L unit -j 16 --timeout 600 > "$out/ctest-unit.log" 2>&1
      grep -E "tests passed|tests failed|\(Failed\)" "$out/ctest-unit.log" | head
      log "Python tests (all; GPU ones run for real here)"
      PYTHONPATH="$build/python" FERRY_CLI="$build/cli/ferry" $python -m pytest python/tests -q -rs -s \
        -p no:cacheprovider --basetemp="$build/python/pytest-tmp" > "$out/pytest.log" 2>&1
      grep -E "python stress|passed|failed|FAILED|Error" "$out/pytest.log" | tail -15
      ;;
    soak-wait)
      log "waiting for the soak"
      while [ -e "/proc/$(cat "$out/soak.pid")" ]; do sleep 5; done
      tail -2 "$out/soak.jsonl"
      ;;
  esac
  shift
done
[ -n "${OUT:-}" ] && cp "$out"/*.log "$out"/*.jsonl "$OUT"/ 2>/dev/null
log "done"
