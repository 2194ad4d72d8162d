#!/bin/bash
# Call G3 of 2026-12-03: c13ae47's GPU tests: the C++ GPU tests (+ CPU unit tests, ctest) and the Python GPU
# tests of the installed package.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -3
log built
scripts/gpu-session.sh test 2>&1 | tail -25
log tests done
timeout 200 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -8
log end
tar czf $OUT/g3.tgz --exclude='*.bin' -C build-gpu out
