#!/usr/bin/env bash
# The io_uring engine against psync on the host route: the same file, the same threads and task sizes,
# hot (page cache) and cold (evicted before each run), with the CPU time per GiB that `ferry-bench` reports.
# Usage: bench/io_uring_sweep.sh FERRY_CLI FILE OUT_DIR [SIZE]
set -uo pipefail
ferry=$1 file=$2 out=$3 size=${4:-1GiB}
bench=$(dirname "$ferry")/ferry-bench  # built beside ferry
mkdir -p "$out"
for cache in hot cold; do
  for engine in psync io_uring; do
    FERRY_IO_ENGINE=$engine "$bench" "$file" --size "$size" --cache "$cache" --routes host --baselines none \
      --threads 1,2 --task-size 4KiB,64KiB,4MiB --repeats 3 --cold-repeats 2 --json-out "$out/$cache-$engine.json" \
      --no-progress > "$out/$cache-$engine.txt" 2>&1
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
rows = {}
for cache in ("hot", "cold"):
    for engine in ("psync", "io_uring"):
        d = json.load(open(os.path.join(out, f"{cache}-{engine}.json")))
        for r in d["results"]:
            if r["name"] != "host" or r.get("status") != "ok":
                continue
            key = (cache, r.get("threads"), r.get("task_size"))
            cpu = r.get("cpu_s_per_gib")
            rows.setdefault(key, {})[engine] = (r["median_gib_per_s"], cpu)
print("cache threads task   psync GiB/s  io_uring GiB/s  ratio   (CPU s/GiB psync, io_uring)")
for (cache, t, task), v in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2] or 0)):
    p, u = v.get("psync"), v.get("io_uring")
    if p and u:
        print(f"{cache:5} {t!s:7} {task!s:>8} {p[0]:11.2f} {u[0]:14.2f} {u[0]/p[0]:7.2f}   ({p[1]:.2f}, {u[1]:.2f})")
PY
