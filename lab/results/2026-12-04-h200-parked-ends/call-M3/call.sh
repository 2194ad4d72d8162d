#!/bin/bash
# Call M3 (2026-12-04, branch x-parked-ends): only jobs that take one task at a time park (large reads, not
# batches), still only while more jobs wait than the request has. FERRY_X_PARK=0 (temporary) is the old way, in
# the same build, alternating. Prediction: 16 MiB reads in flight keep M1/M2's 1.11-1.14x; batches equal
# (nothing of theirs parks), 4 KiB pieces in 32 MiB batches included to see whether M2's 0.89x was noise.
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
timeout 100 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
log gpu tests done
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
sr=build-gpu/tests/ferry_small_reads
mkdir -p $OUT/park
declare -A park=([wait]=0 [park]=1)
for round in 1 2 3; do
  order="wait park"; [ $((round % 2)) = 0 ] && order="park wait"
  for tree in $order; do
    cat "$f" > /dev/null
    export FERRY_X_PARK=${park[$tree]}
    timeout 60 $sr "$f" --sizes 4KiB,64KiB --bytes-per-mode 2GiB --batch-bytes 32MiB --batches-in-flight 2 --modes batch > $OUT/park/b32x2-$tree-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 1MiB,16MiB --bytes-per-mode 2GiB --modes ferry,ferry-mt > $OUT/park/r-$tree-$round.txt 2>&1
    unset FERRY_X_PARK
  done
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/park wait park | tee $OUT/summary-park.txt
grep -h "wrong\|error\|fail" $OUT/park/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT park && rm -rf $OUT/park
log end
