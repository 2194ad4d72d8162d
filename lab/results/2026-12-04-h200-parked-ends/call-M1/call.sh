#!/bin/bash
# Call M1 (2026-12-04): a job whose copies still run while other jobs wait parks its end on its thread, which
# reads for the next job meanwhile (ThreadPool::park). FERRY_X_PARK=0 (a temporary switch) is the old way, in
# the same build, alternating. Prediction: four 64 MiB batches in flight move from 0.94-0.96x of plain-batches
# toward 1.0x; two in flight and 16 MiB reads in flight must not lose (a watcher of the same kind lost at two in
# flight on 2026-12-02, partly to new staging kits).
set -u
source .device-deps/gpu-env.sh
log() { echo "== $(date -u +%T) $*"; }
log start
scripts/gpu-session.sh build 2>&1 | tail -1
log built
timeout 100 build-gpu/tests/ferry_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  FAILED |^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|stress on" $OUT/gpu_tests.log | head -8
PYTHONPATH=build-gpu/python timeout 60 python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_batch.py 2>&1 | tail -2
log gpu tests done
f=build-gpu/data/small-4GiB.bin
[ -f "$f" ] || { build-gpu/cli/ferry write "$f" --size 4GiB --no-sync > /dev/null && sync; }
sr=build-gpu/tests/ferry_small_reads
mkdir -p $OUT/park
declare -A park=([wait]=0 [park]=1)
for round in 1 2; do
  order="wait park"; [ $((round % 2)) = 0 ] && order="park wait"
  for tree in $order; do
    cat "$f" > /dev/null
    export FERRY_X_PARK=${park[$tree]}
    timeout 60 $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes 64MiB --batches-in-flight 4 --modes batch,plain-batches > $OUT/park/b64x4-$tree-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 4KiB,64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes 32MiB --batches-in-flight 2 --modes batch > $OUT/park/b32x2-$tree-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 2GiB --batch-bytes 64MiB --batches-in-flight 2 --modes batch > $OUT/park/b64x2-$tree-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 64KiB,1MiB --bytes-per-mode 4GiB --batch-bytes 256MiB --modes batch > $OUT/park/b256x2-$tree-$round.txt 2>&1
    timeout 60 $sr "$f" --sizes 16MiB --bytes-per-mode 2GiB --modes ferry,ferry-mt > $OUT/park/r16-$tree-$round.txt 2>&1
    unset FERRY_X_PARK
  done
  log "round $round"
done
python3 bench/results/2026-12-03-h200-alternating/rounds_summary.py $OUT/park wait park | tee $OUT/summary-park.txt
grep -h "wrong\|error\|fail" $OUT/park/*.txt | head -5
tar czf $OUT/runs.tgz -C $OUT park && rm -rf $OUT/park
build-gpu/tests/ferry_copy_contention "$f" 2>&1 | tail -3
log end
