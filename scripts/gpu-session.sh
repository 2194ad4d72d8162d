#!/usr/bin/env bash
# One run on the GPU machine (see DEVELOPERS notes in README): build everything, run every test with the
# GPU tests for real, the forced-route matrix, and a few timed reads. Logs go to $OUT (or build-gpu/out).
# Usage, from the repository root on the GPU machine: source .device-deps/gpu-env.sh; scripts/gpu-session.sh [STEPS]
# STEPS: any of build test matrix doctor reads bench (default: build test matrix doctor reads).
set -uo pipefail
steps=${1:-"build test matrix doctor reads"}
build=${FERRY_BUILD_DIR:-build-gpu}
# Logs go to $build/out; with $OUT set (the device tool), they also come back as one archive, since only a
# few files return from there.
out=$build/out
rm -rf "$out" && mkdir -p "$out"
python=$(command -v python3)
has() { [[ " $steps " == *" $1 "* ]]; }
log() { echo "== $(date -u +%H:%M:%S) $*"; }

{
  log "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  uname -r; nproc; free -g | head -2; findmnt -n -o SOURCE,FSTYPE,OPTIONS --target . ; git rev-parse HEAD 2>/dev/null
  ls /usr/local/cuda/lib64/libcufile.so* 2>&1 | head -3
} 2>&1 | tee "$out/machine.txt"

if has build; then
  log "build"
  pybind=$($python -m pybind11 --cmakedir 2>/dev/null || true)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=ON \
    -DPython_EXECUTABLE="$python" ${pybind:+-Dpybind11_DIR=$pybind} > "$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
  cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { grep -E 'error|Error' "$out/build.log" | head -30; exit 1; }
fi
if has test; then
  log "ctest (unit, fault, cli, python, gpu)"
  ctest --test-dir "$build" --output-on-failure -j 8 --timeout 600 > "$out/ctest.log" 2>&1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$out/ctest.log" | tail -20
  "$build/tests/ferry_gpu_tests" --gtest_brief=0 > "$out/gpu_tests.log" 2>&1
  # The Python suite again, verbosely, so that the record shows which GPU cases ran and which skipped.
  PYTHONPATH="$build/python" FERRY_CLI="$build/cli/ferry" $python -m pytest python/tests -q -rs \
    -p no:cacheprovider --basetemp="$build/python/pytest-tmp" > "$out/pytest.log" 2>&1
  tail -3 "$out/pytest.log"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Skipped|operations" "$out/gpu_tests.log" | head -60
fi
if has matrix; then
  log "forced-route matrix"
  bash scripts/gpu-route-matrix.sh "$build/cli/ferry" "$build/data" 1GiB 2>&1 | tee "$out/matrix.log"
  cp "$build/data/matrix.jsonl" "$out/" 2>/dev/null
fi
if has doctor; then
  log "ferry doctor, with and without the udev record"
  f="$build/data/doctor.bin"
  [ -f "$f" ] || "$build/cli/ferry" write "$f" --size 256MiB > /dev/null
  rec="/run/udev/data/b$(stat -c '%Hd:%Ld' "$f")"
  {
    echo "### with the udev record ($rec)"
    "$build/cli/ferry" doctor "$f" --probe; echo "exit status $?"
    "$build/cli/ferry" doctor "$f" --probe --compat off | sed -n '/^PREDICTION/,$p'; echo "exit status ${PIPESTATUS[0]}"
    "$build/cli/ferry" doctor "$f" --require-gds > /dev/null; echo "--require-gds: exit status $?"
    "$build/cli/ferry" doctor "$f" --probe --json > "$out/doctor-udev.json"
    "$build/cli/ferry" doctor "$f" --probe --compat off --json > "$out/doctor-udev-compat-off.json"
    cp "$rec" "$out/udev-record.bak"
    rm -f "$rec"
    echo "### without the udev record"
    "$build/cli/ferry" doctor "$f" --probe | sed -n '/^FILE\|^PREDICTION/,$p'; echo "exit status ${PIPESTATUS[0]}"
    "$build/cli/ferry" doctor "$f" --compat off > /dev/null; echo "--compat off: exit status $?"
    "$build/cli/ferry" doctor "$f" --probe --json > "$out/doctor-no-udev.json"
    cp "$out/udev-record.bak" "$rec"
  } > "$out/doctor.txt" 2>&1
  grep -E "^###|will take route|proved|exit status|udev" "$out/doctor.txt" | head -40
fi
if has bench; then
  log "benchmarks (bench/run-gpu-bench.sh)"
  FERRY_BENCH_DATA=$build/bench-data bash bench/run-gpu-bench.sh "$build/cli/ferry" "$out/bench" 2>&1 | tail -60
fi
if has reads; then
  log "timed reads of an 8 GiB file (hot)"
  big="$build/data/big-8GiB.bin"
  [ -f "$big" ] || "$build/cli/ferry" write "$big" --size 8GiB --no-sync > /dev/null
  cat "$big" > /dev/null
  for args in "--device 0" "--device 0" "--device 0 --compat off" "--threads 16"; do
    "$build/cli/ferry" read "$big" $args --json | $python scripts/summarize_read.py "${args:-host}"
  done
  log "cold reads (caches dropped before each)"
  for args in "--device 0" "--threads 16"; do
    if sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
      "$build/cli/ferry" read "$big" $args --json | $python scripts/summarize_read.py "cold $args"
    else
      echo "cannot drop caches here"
    fi
  done
fi
log "done"
[ -n "${OUT:-}" ] && tar czf "$OUT/session-$(date -u +%H%M%S).tgz" -C "$out" . && ls -la "$OUT"
