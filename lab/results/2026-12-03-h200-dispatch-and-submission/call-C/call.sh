#!/bin/bash
# Call C of 2026-12-03 (untracked): main's tree as committed (a13fe21): build, the C++ GPU tests, the Python GPU
# tests (and the fork tests, whose parent starts CUDA), and pip install of the checkout.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
echo "== $(date -u +%T) start"
bash scripts/gpu-session.sh build 2>&1 | tail -3
timeout 150 build-gpu/tests/ferry_gpu_tests > $o/gpu-tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (FAILED|PASSED) |^\[==========\] [0-9]+ tests.*ran|WATCHDOG" $o/gpu-tests.log | tail -4
timeout 240 bash scripts/gpu-session.sh pytest-gpu 2>&1 | tail -6
PYTHONPATH=build-gpu/python timeout 120 python3 -m pytest python/tests/test_fork.py -q -p no:cacheprovider > $o/pytest-fork.log 2>&1; echo "fork tests rc=$?"; tail -2 $o/pytest-fork.log
timeout 200 bash scripts/gpu-session.sh pip 2>&1 | tail -4
echo "== $(date -u +%T) end"
tar czf $OUT/rC.tgz -C build-gpu out
