#!/bin/bash
# Call G2 of 2026-12-03: a0ef73f (gathering up to 64 KiB once probed cached) against 2e2be0c (.old-tree),
# alternating, two hot rounds and one cold; then ferry-1 alone in each build (G1 had one read at a time 0.8x
# after the in-flight modes), twice.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
log() { echo "== $(date -u +%T) $*"; }
log start
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $o/machine.txt; nproc >> $o/machine.txt
scripts/gpu-session.sh build 2>&1 | tail -3
log built
HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 256MiB --modes ferry,ferry-mt,ferry-1,plain" \
COLD_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 32MiB --modes raw-host,plain,ferry,ferry-mt" \
  bench/small_reads_ab.sh $o/ab 2 1 > $o/ab.log 2>&1; echo "ab rc=$?"
log ab done
python3 - $o/ab > $o/ab-summary.txt <<'PY'
import json, sys, os, collections
d = sys.argv[1]
for cache in ("hot", "cold"):
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    for which in ("old", "new"):
        for r in (1, 2):
            p = f"{d}/{cache}-{which}-{r}.json"
            if not os.path.exists(p): continue
            for e in json.load(open(p)):
                val = e["us_per_request"] if e["mode"] == "ferry-1" else e["gb_per_s"]
                rows[(e["size"], e["mode"])][which].append((val, e["verified"]))
    for (size, mode), by in sorted(rows.items()):
        o, n = [v for v, _ in by["old"]], [v for v, _ in by["new"]]
        ratio = " ".join(f"{b / a:.2f}" for a, b in zip(o, n)) if mode != "ferry-1" else " ".join(f"{a / b:.2f}" for a, b in zip(o, n))
        ok = all(v for _, v in by["old"] + by["new"])
        print(f"{cache} {size:>8} {mode:9} {'us' if mode == 'ferry-1' else 'GB/s':4} old {' '.join(f'{v:7.2f}' for v in o)}  new {' '.join(f'{v:7.2f}' for v in n)}  new/old speed {ratio}  verified {ok}")
PY
cat $o/ab-summary.txt
file=build-gpu/data/small-4GiB.bin
for r in 1 2; do
  for which in old new; do
    bin=build-gpu/tests/ferry_small_reads; [ $which = old ] && bin=build-old/tests/ferry_small_reads
    echo "ferry-1 alone, $which, round $r"
    $bin $file --cache hot --sizes 4KiB,64KiB --modes ferry-1 2>&1 | grep -A1 "ferry-1" | tee -a $o/ferry-1-alone.txt
  done
done
log end
tar czf $OUT/g2.tgz --exclude='*.bin' -C build-gpu out
