#!/usr/bin/env bash
# Where the staged route's hot throughput and its first-read cost go: the same hot file read with several
# staging shapes (threads x bounce buffer size x buffers per thread x task size), each against the copy
# ceiling measured in the same run, and each shape's first read in a fresh process (its pinning cost).
# Usage (GPU machine): bench/staging_sweep.sh FERRY_CLI OUT_DIR [FILE_DIR]
#   SWEEP_SIZE (default 8GiB) the hot read; SWEEP_SHAPES overrides the list below ("T:B:K:TASK ...").
set -uo pipefail
ferry=$1
bench=$(dirname "$ferry")/ferry-bench  # built beside ferry
out=$2
data=${3:-$out}
mkdir -p "$out" "$data"
size=${SWEEP_SIZE:-8GiB}
file=$data/sweep-$size.bin
first=$data/sweep-first-1GiB.bin
[ -f "$file" ] || "$ferry" write "$file" --size "$size" --no-sync > /dev/null
[ -f "$first" ] || "$ferry" write "$first" --size 1GiB --no-sync > /dev/null
# Writeback of files just made would run under the first measurements (measured: 0.885 against 0.969 later
# in the same run): flush it first.
sync
shapes=${SWEEP_SHAPES:-"16:4MiB:2:4MiB 16:2MiB:2:4MiB 16:1MiB:2:4MiB 16:8MiB:2:8MiB 16:4MiB:3:4MiB 16:2MiB:4:4MiB \
16:4MiB:2:16MiB 12:4MiB:2:4MiB 8:4MiB:2:4MiB 8:8MiB:2:8MiB"}

summary() {  # summary JSON: the staged median, the copy ceiling and their ratio, or the first-read notes
  /usr/bin/env python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["name"]: r for r in d["results"] if r.get("status") == "ok"}
def med(r):
    return r.get("median_gib_per_s") or 0
if "copy" in rows:
    s, c = rows.get("staged"), rows["copy"]
    print("staged %.2f GiB/s, copy %.2f GiB/s (%s), ratio %.3f" % (med(s) if s else 0, med(c), c["notes"][0], (med(s) / med(c)) if s else 0))
    print("   ", c["notes"][-1])
else:
    for r in rows.values():
        for n in r.get("notes", []):
            if "fresh processes" in n:
                print("   ", n)
EOF
}

"$bench" "$file" --size "$size" --cache hot --repeats 5 --routes staged --baselines copy \
  --json-out "$out/sweep-default.json" > "$out/sweep-default.txt" 2>&1
echo "== default settings: $(summary "$out/sweep-default.json" | head -1)"
summary "$out/sweep-default.json" | tail -1
for shape in $shapes; do
  IFS=: read -r t b k task <<< "$shape"
  tag="t$t-b$b-k$k-task$task"
  export FERRY_THREADS=$t FERRY_BOUNCE_BUFFER_SIZE=$b FERRY_BOUNCE_BUFFERS_PER_THREAD=$k FERRY_TASK_SIZE=$task
  "$bench" "$file" --size "$size" --cache hot --repeats 5 --routes staged --baselines none \
    --json-out "$out/sweep-$tag.json" > "$out/sweep-$tag.txt" 2>&1
  "$bench" "$first" --size 1GiB --cache hot --repeats 3 --routes staged --baselines none --first-read \
    --json-out "$out/first-$tag.json" > "$out/first-$tag.txt" 2>&1
  /usr/bin/env python3 - "$out/sweep-$tag.json" "$out/sweep-default.json" "$tag" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
s = [r for r in d["results"] if r["name"] == "staged" and r.get("status") == "ok"]
cp = [r for r in c["results"] if r["name"] == "copy" and r.get("status") == "ok"]
if s and cp:
    print("%-34s staged %.2f GiB/s = %.3f of copy" % (sys.argv[3], s[0]["median_gib_per_s"], s[0]["median_gib_per_s"] / cp[0]["median_gib_per_s"]))
else:
    print(sys.argv[3], "failed:", [r.get("reason") for r in d["results"]])
EOF
  summary "$out/first-$tag.json"
  unset FERRY_THREADS FERRY_BOUNCE_BUFFER_SIZE FERRY_BOUNCE_BUFFERS_PER_THREAD FERRY_TASK_SIZE
done
