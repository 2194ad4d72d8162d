#!/bin/bash
# Call B2 of 2026-12-03 (untracked; branch x-dispatch): the pool's lock taken spinning before sleeping
# (FERRY_X_SPINLOCK, on by default in this build) against off, alternating, two rounds; phases of a
# submission with each; the C++ GPU tests and issue 21's goals with it on.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o/x
log() { echo "== $(date -u +%T) $*"; }
log start
git rev-parse HEAD > $o/commit.txt
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $o/cmake.log 2>&1 &&
  cmake --build build-gpu -j 16 > $o/build.log 2>&1; echo "build rc=$?"; tail -1 $o/build.log
log built
sr=build-gpu/tests/ferry_small_reads
mkdir -p build-gpu/data; f=build-gpu/data/small-4GiB.bin
[ -f $f ] || build-gpu/cli/ferry write $f --size 4GiB --no-sync > /dev/null
cat $f > /dev/null
for round in 1 2; do for sp in 0 1; do
  FERRY_X_SPINLOCK=$sp timeout 60 $sr $f --sizes 4KiB,64KiB,1MiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,batch \
    --json-out $o/x/spin$sp-$round.json > $o/x/spin$sp-$round.txt 2>&1 || echo "spin $sp exit $?"
done; done
for sp in 0 1; do for mode in ferry ferry-mt; do
  FERRY_X_SPINLOCK=$sp FERRY_X_PHASES=1 timeout 30 $sr $f --sizes 4KiB --bytes-per-mode 512MiB --modes $mode > $o/x/phases-spin$sp-$mode.txt 2>&1
  echo "spin $sp $mode: $(grep -o 'submitting.*thread' $o/x/phases-spin$sp-$mode.txt)"; grep x_phases $o/x/phases-spin$sp-$mode.txt
done; done
python3 - $o/x <<'PY' | tee $o/summary.txt
import json, glob, sys, collections
d = sys.argv[1]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(d + "/spin*.json")):
    v, rnd = f.rsplit("/", 1)[1][:-5].rsplit("-", 1)
    for r in json.load(open(f)):
        val = r["us_per_request"] if r["mode"].endswith("1") else r["gb_per_s"]
        rows[(r["size"], r["mode"])][v].append((val, r["cpu_seconds"] / r["requests"] * 1e6, r["voluntary_switches"] / r["requests"]))
for key in sorted(rows):
    a = rows[key]; m = lambda v: sum(x[0] for x in v) / len(v)
    ratio = m(a["spin1"]) / m(a["spin0"]) if a["spin0"] and a["spin1"] else float("nan")
    if key[1].endswith("1"): ratio = 1 / ratio
    print(f"{key[0]:>8} {key[1]:9} off " + " ".join(f"{x[0]:7.2f}" for x in a["spin0"]) + "   on " + " ".join(f"{x[0]:7.2f}" for x in a["spin1"]) + f"   on/off {ratio:.2f} (speed)   cpu us off/on {a['spin0'][0][1]:.1f}/{a['spin1'][0][1]:.1f}  vcs {a['spin0'][0][2]:.2f}/{a['spin1'][0][2]:.2f}")
PY
log ab done
timeout 150 build-gpu/tests/ferry_gpu_tests > $o/gpu-tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (FAILED|PASSED) |^\[==========\]|WATCHDOG" $o/gpu-tests.log | tail -4
log tests done
OUT= timeout 220 bash scripts/gpu-session.sh small-reads-goals 2>&1 | grep -v "^== .* machine" | tail -22
log end
tar czf $OUT/rB2.tgz -C build-gpu out
