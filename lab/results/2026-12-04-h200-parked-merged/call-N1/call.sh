#!/bin/bash
# Call N1 (2026-12-04): parked ends of large reads merged (cc57f70). The C++ GPU tests; issue 21's
# no-regression rows against d7cbac4 (carried as .old-d7, `git archive d7cbac4`), old and new alternating: hot
# 8 GiB staged reads, fresh-process first read of 1 GiB, fresh-process safetensors loads hot and cold (large
# reads may now park); then 1 MiB and 16 MiB single reads in flight beside the plain loop, two passes.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
timeout 100 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
log gpu tests done
NR_ROUNDS=3 timeout 330 scripts/gpu-session.sh no-regression > $OUT/no-regression.log 2>&1; echo "no-regression rc=$?"
tail -30 $OUT/no-regression.log
(cd build-gpu/out && tar czf $OUT/no-regression-out.tgz nr-* ab-* old-*.log 2>/dev/null)
log no-regression done
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
for pass in 1 2; do
  cat "$f" > /dev/null
  timeout 60 build-gpu/tests/ferry_small_reads "$f" --sizes 1MiB,16MiB --bytes-per-mode 2GiB --modes ferry,ferry-mt,plain \
    > $OUT/in-flight-$pass.txt 2>&1
  grep -v "^#" $OUT/in-flight-$pass.txt | tail -8
done
log end
