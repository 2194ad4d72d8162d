#!/bin/bash
# Call L1 (2026-12-03, night): issue 21's no-regression rows against d7cbac4 (carried as .old-d7, `git archive
# d7cbac4`), built on the machine: hot 8 GiB staged reads, the fresh-process first read of 1 GiB, fresh-process
# safetensors loads hot and cold, old and new alternating; then the C++ GPU tests on the tip.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start; git log --oneline -1 2>/dev/null
scripts/gpu-session.sh build 2>&1 | tail -1
log built
NR_ROUNDS=3 timeout 330 scripts/gpu-session.sh no-regression > $OUT/no-regression.log 2>&1; echo "no-regression rc=$?"
tail -40 $OUT/no-regression.log
(cd build-gpu/out && tar czf $OUT/no-regression.tgz nr-* ab-* old-*.log 2>/dev/null)
log no-regression done
timeout 100 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
log end
