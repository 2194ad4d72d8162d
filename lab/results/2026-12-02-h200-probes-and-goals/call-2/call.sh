#!/bin/bash
# Call 2 of 2026-12-02 late (untracked): a job past its grace period waits while every core runs a job,
# A/B against 60f78f4 (.old-tree) with bench/small_reads_ab.sh (hot twice, cold once), then the GPU tests.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
log() { echo "== $(date -u +%T) $*"; }
log start
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF > $o/cmake.log 2>&1 &&
  cmake --build build-gpu -j 10 > $o/build.log 2>&1; echo "new build rc=$?"; tail -2 $o/build.log ) &
( cmake -S .old-tree -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF > $o/old-cmake.log 2>&1 &&
  cmake --build build-old -j 6 --target ferry_small_reads ferry_cli ferry_bench > $o/old-build.log 2>&1; echo "old build rc=$?"; tail -2 $o/old-build.log ) &
wait
log built
mkdir -p build-gpu/data
HOT_ARGS="--sizes 4KiB,64KiB,1MiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,batch" \
COLD_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 64MiB --modes raw-host,ferry,ferry-mt,batch" \
  timeout 300 bash bench/small_reads_ab.sh $o/ab 2 1 > $o/ab.log 2>&1; echo "ab rc=$?"
python3 - $o/ab <<'PY'
import json, glob, sys, collections
d = sys.argv[1]
rows = collections.defaultdict(lambda: {"old": [], "new": []})
for f in sorted(glob.glob(d + "/*.json")):
    cache, which, rnd = f.rsplit("/", 1)[1][:-5].split("-")
    for r in json.load(open(f)):
        rows[(cache, r["size"], r["mode"])][which].append(r["gb_per_s"] if not r["mode"].endswith("1") else r["us_per_request"])
for (cache, size, mode), v in sorted(rows.items()):
    unit = "us" if mode.endswith("1") else "GB/s"
    ratio = (sum(v["new"]) / len(v["new"])) / (sum(v["old"]) / len(v["old"])) if v["old"] and v["new"] else float("nan")
    print(f"{cache:4} {size:>9} {mode:9} old {' '.join('%.2f' % x for x in v['old']):24} new {' '.join('%.2f' % x for x in v['new']):24} {unit} new/old {ratio:.2f}")
PY
log ab done
timeout 150 build-gpu/tests/ferry_gpu_tests > $o/gpu-tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (FAILED|PASSED) |^\[==========\]|WATCHDOG|SKIPPED \]" $o/gpu-tests.log | tail -8
log end
tar czf $OUT/r2.tgz -C build-gpu out
