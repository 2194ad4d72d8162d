#!/bin/bash
# Call D of 2026-12-03 (untracked): the pool looks only at the first of the jobs in their grace period
# (working tree on 241e08d) against 241e08d (.old-tree), alternating, two rounds; then the C++ GPU tests.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o/ab
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $o/cmake.log 2>&1 &&
  cmake --build build-gpu -j 10 > $o/build.log 2>&1; echo "new build rc=$?" ) &
( cmake -S .old-tree -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF -DFERRY_BUILD_TESTS=ON > $o/old-cmake.log 2>&1 &&
  cmake --build build-old -j 6 --target ferry_small_reads > $o/old-build.log 2>&1; echo "old build rc=$?" ) &
wait
echo "== $(date -u +%T) built"
f=build-gpu/data/small-4GiB.bin; mkdir -p build-gpu/data
build-gpu/cli/ferry write $f --size 4GiB --no-sync > /dev/null; cat $f > /dev/null
for r in 1 2; do for w in old new; do
  b=build-gpu/tests/ferry_small_reads; [ $w = old ] && b=build-old/tests/ferry_small_reads
  timeout 60 $b $f --sizes 4KiB,64KiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain --json-out $o/ab/$w-$r.json > $o/ab/$w-$r.txt 2>&1 || echo "$w $r exit $?"
done; done
python3 - $o/ab <<'PY' | tee $o/ab-summary.txt
import json, glob, sys, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    w, r = f.rsplit("/", 1)[1][:-5].split("-")
    for x in json.load(open(f)):
        rows[(x["size"], x["mode"])][w].append(x["us_per_request"] if x["mode"].endswith("1") else x["gb_per_s"])
for k in sorted(rows):
    a = rows[k]; m = lambda v: sum(v) / len(v)
    sp = m(a["new"]) / m(a["old"]); sp = 1 / sp if k[1].endswith("1") else sp
    print(f"{k[0]:>7} {k[1]:9} old {' '.join('%.2f' % v for v in a['old']):14} new {' '.join('%.2f' % v for v in a['new']):14} new/old speed {sp:.2f}")
PY
echo "== $(date -u +%T) ab done"
timeout 120 build-gpu/tests/ferry_gpu_tests > $o/gpu-tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (FAILED|PASSED) |^\[==========\] [0-9]+ tests.*ran|WATCHDOG" $o/gpu-tests.log | tail -3
tar czf $OUT/rD.tgz -C build-gpu out
