#!/bin/bash
# Call L3 (2026-12-03, night): batched copies kept (the FERRY_X_BATCHED_COPY switch removed). Build, the C++ GPU
# tests, one question, and the goals in two passes (with the new rows of four batches in flight).
# The question: with four 64 MiB batches in flight Ferry read 48.0-48.5 GB/s where plain-batches read 50.3-50.9
# (L2); each worker waits for its last copy before it takes the next job. Prediction: if that wait is what
# costs, more workers than cores (FERRY_THREADS=32) read on while others wait, and close part of the gap.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
timeout 100 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
PYTHONPATH=build-gpu/python timeout 60 python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_batch.py 2>&1 | tail -3
log gpu tests done
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
sr=build-gpu/tests/ferry_small_reads
mkdir -p $OUT/threads
for round in 1 2; do
  order="16 32"; [ $((round % 2)) = 0 ] && order="32 16"
  for t in $order; do
    cat "$f" > /dev/null
    FERRY_THREADS=$t timeout 60 $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes 64MiB --batches-in-flight 4 --modes batch > $OUT/threads/b64x4-t$t-$round.txt 2>&1
  done
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/threads t16 t32 | tee $OUT/summary-threads.txt
tar czf $OUT/threads.tgz -C $OUT threads && rm -rf $OUT/threads
log threads done
GOALS_PASSES=2 timeout 300 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1; echo "goals rc=$?"
grep -A40 "^copy ceiling" $OUT/goals.log
(cd build-gpu/out && tar czf $OUT/goals.tgz goals-*)
log end
