#!/usr/bin/env bash
# One bounded GPU call for issues 20-22 (2026-12-01): every step under its own time limit, so that the
# logs come back even when one step hangs. Run from the repository root after sourcing gpu-env.sh.
set -uo pipefail
export FERRY_BUILD_DIR=build-gpu
out=build-gpu/out; data=build-gpu/data; py=$(command -v python3); pp=build-gpu/python; cli=build-gpu/cli/ferry
mkdir -p "$out"
( while sleep 40; do tar czf "$OUT/out.tgz.part" -C "$out" . 2>/dev/null && mv "$OUT/out.tgz.part" "$OUT/out.tgz"; done ) &
step() { local limit=$1; shift; echo "== $(date -u +%H:%M:%S) $*"; timeout -k 5 "$limit" "$@"; echo "   (exit $?)"; }
step 120 bash scripts/gpu-session.sh build
mkdir -p "$data"
step 90 bash -c "build-gpu/tests/ferry_gpu_tests --gtest_filter='*StreamOrder*:*Safetensors*:*Stress*' > $out/gpu-tests.log 2>&1; grep -E '^\[  (FAILED|SKIPPED|PASSED) |tests ran|WATCHDOG' $out/gpu-tests.log | head -12"
step 90 bash -c "PYTHONPATH=$pp $py -m pytest python/tests/test_issue_20_gpu.py python/tests/test_batch.py -q -rs -p no:cacheprovider --basetemp=build-gpu/pt > $out/pytest-20.log 2>&1; tail -4 $out/pytest-20.log"
step 120 bash -c "PYTHONUNBUFFERED=1 PYTHONPATH=$pp $py bench/stream_order_stress.py --requests 2000 --seed 20261201 --watchdog 120 --dir $data > $out/stress.log 2>&1; tail -3 $out/stress.log"
step 80 bash -c "PYTHONUNBUFFERED=1 FERRY_CLI=$cli PYTHONPATH=$pp $py bench/stream_order_bench.py --dir $data --repeats 3 --json-out $out/stream-order-bench.json 2>&1 | tee $out/stream-order-bench.txt"
step 100 bash -c "f=$data/small-4GiB.bin; [ -f \$f ] || $cli write \$f --size 4GiB --no-sync > /dev/null; cat \$f > /dev/null; build-gpu/tests/ferry_small_reads \$f --bytes-per-mode 512MiB --json-out $out/small-reads-hot.json 2>&1 | tee $out/small-reads-hot.txt"
step 30 bash -c "PYTHONPATH=$pp $py examples/token_windows.py --steps 100 2>&1 | tee $out/token-windows.txt"
step 30 bash -c "$py tests/fixtures/safetensors/make_golden.py $out/golden 2>&1 | tail -2; PYTHONPATH=$pp FERRY_GOLDEN_DIR=$out/golden $py -m pytest python/tests/test_safetensors_golden.py -q -p no:cacheprovider 2>&1 | tail -2"
kill %1 2>/dev/null; tar czf "$OUT/out.tgz" -C "$out" . 2>/dev/null; rm -f "$OUT/out.tgz.part"; echo "== done $(date -u +%H:%M:%S)"
