#!/usr/bin/env bash
# Where a hot staged request's fixed cost goes: for each size, ferry-bench's thread and task-size sweep
# against the copy ceiling at that size, then the default shape's timeline (lab/nvtx_timeline.cpp)
# broken down per request by lab/timeline_summary.py.
# Usage: lab/request_timeline.sh FERRY_CLI TIMELINE_LIB OUT_DIR DATA_DIR [SIZES]
set -uo pipefail
ferry=$1 lib=$2 out=$3 data=$4 sizes=${5:-"256MiB 1GiB"}
bench=$(dirname "$ferry")/ferry-bench  # built beside ferry
python=$(command -v python3)
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" "$data"
for size in $sizes; do
  f="$data/size-$size.bin"
  [ -f "$f" ] || { "$ferry" write "$f" --size "$size" --no-sync > /dev/null && sync; }
  "$bench" "$f" --size "$size" --cache hot --repeats 10 --routes staged --baselines copy \
    --threads 8,12,16 --task-size 1MiB,2MiB,4MiB,8MiB --no-progress --json-out "$out/sweep-$size.json" > /dev/null 2>&1
  $python - "$out/sweep-$size.json" "$size" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["results"] if r["name"] == "staged" and r["status"] == "ok"]
copy = [r for r in d["results"] if r["name"].startswith("copy") and r["status"] == "ok"]
print(sys.argv[2], "copy ceiling", max((r["median_gib_per_s"] or 0) for r in copy) if copy else None, "GiB/s")
for r in sorted(rows, key=lambda r: -(r["median_gib_per_s"] or 0)):
    print("  staged threads=%s task=%s %.2f GiB/s %s" % (r.get("threads"), r.get("task_size"), r["median_gib_per_s"] or 0,
          ("(%.3f of copy)" % r["ratios"]["copy"]) if "copy" in (r.get("ratios") or {}) else ""))
PY
  FERRY_NVTX=1 NVTX_INJECTION64_PATH=$lib FERRY_TIMELINE_OUT="$out/timeline-$size.txt" \
    "$bench" "$f" --size "$size" --cache hot --repeats 20 --routes staged --baselines none --no-progress \
    --json-out "$out/timeline-$size.json" > /dev/null 2>&1
  $python "$here/timeline_summary.py" "$out/timeline-$size.txt" --skip 2
done
