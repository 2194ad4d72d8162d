#!/bin/bash
# Call F2 of 2026-12-03: bf5e86a (help_own: a waiter runs its own queued one-task reads) against e4c2ce1
# (.old-tree), alternating, two rounds; then the C++ GPU tests (+ CPU unit tests) and the Python GPU tests.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
log() { echo "== $(date -u +%T) $*"; }
log start
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $o/machine.txt; nproc >> $o/machine.txt
scripts/gpu-session.sh build 2>&1 | tail -5
log built
HOT_ARGS="--sizes 4KiB,64KiB,1MiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,batch" COLD_ARGS="" \
  bench/small_reads_ab.sh $o/ab 2 > $o/ab.log 2>&1; echo "ab rc=$?"
log ab done
python3 - $o/ab > $o/ab-summary.txt <<'PY'
import json, sys, os, collections
d = sys.argv[1]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for which in ("old", "new"):
    for r in (1, 2):
        p = f"{d}/hot-{which}-{r}.json"
        if not os.path.exists(p): continue
        for e in json.load(open(p)):
            val = e["us_per_request"] if e["mode"] == "ferry-1" else e["gb_per_s"]
            rows[(e["size"], e["mode"])][which].append((val, e["verified"]))
for (size, mode), by in sorted(rows.items()):
    o, n = [v for v, _ in by["old"]], [v for v, _ in by["new"]]
    ratio = " ".join(f"{b / a:.2f}" for a, b in zip(o, n)) if mode != "ferry-1" else " ".join(f"{a / b:.2f}" for a, b in zip(o, n))
    ok = all(v for _, v in by["old"] + by["new"])
    print(f"{size:>8} {mode:9} {'us' if mode == 'ferry-1' else 'GB/s':4} old {' '.join(f'{v:7.2f}' for v in o)}  new {' '.join(f'{v:7.2f}' for v in n)}  new/old speed {ratio}  verified {ok}")
PY
cat $o/ab-summary.txt
scripts/gpu-session.sh test 2>&1 | tail -25
log tests done
timeout 170 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -8
log end
tar czf $OUT/f2.tgz -C build-gpu out --exclude='*.bin'
