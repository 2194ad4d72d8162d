#!/usr/bin/env bash
# The acceptance set of `ferry-bench` on the GPU machine, in one go (well under 8 minutes there):
#   1. read-hot   8 GiB, page cache: copy ceiling, raw parallel pread, naive; staged, cufile (compat off), host;
#                 default settings, 3 repeats, --verify
#   2. read-cold  8 GiB, evicted before every run: copy, pread O_DIRECT, naive; staged, cufile; 2 repeats
#   3. sweep      hot staged, threads 4,8,16 x task sizes 1,4,8 MiB, with pread at the same settings
#   4. write      8 GiB from GPU memory, buffered and O_DIRECT, one fdatasync inside the timed region:
#                 copy (device-to-host), raw parallel pwrite from pinned memory; staged; 2 repeats, --verify
# Each step writes <step>.json (schema in bench/README.md), <step>.txt (the table) and <step>.log (progress)
# into the output directory; a compact table of every step and the targets is printed last.
#
# Usage: bench/run-gpu-bench.sh [FERRY_BINARY] [OUTPUT_DIR]
#   FERRY_BINARY  default: ${FERRY_BUILD_DIR:-build}/cli/ferry (build it with scripts/build.sh)
#   OUTPUT_DIR    default: $OUT, else bench/results/<UTC time>
# Environment: FERRY_BENCH_DATA (directory of the 8 GiB data file, on a real disk; default
#   ${FERRY_BUILD_DIR:-build}/bench-data — never $OUT, whose files are copied back), FERRY_BENCH_SIZE (8GiB),
#   FERRY_BENCH_BUDGET_S (450: steps that would start later than this are skipped, and say so).
# Exit status: 0 when every step ran and exited 0 (targets are reported, not enforced), 1 otherwise.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
ferry=${1:-$here/${FERRY_BUILD_DIR:-build}/cli/ferry}
bench=$(dirname "$ferry")/ferry-bench  # built beside ferry
out=${2:-${OUT:-$here/bench/results/$(date -u +%Y%m%dT%H%M%SZ)}}
data=${FERRY_BENCH_DATA:-$here/${FERRY_BUILD_DIR:-build}/bench-data}
size=${FERRY_BENCH_SIZE:-8GiB}
budget=${FERRY_BENCH_BUDGET_S:-450}
[ -x "$bench" ] || { echo "run-gpu-bench: no ferry-bench beside $ferry (build with scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out" "$data" || exit 1
file="$data/bench-$size.bin"
start=$(date +%s)
status=0

step() {  # step NAME BENCH-ARGS...: runs one `ferry-bench` unless the time budget is spent
  local name=$1
  shift
  local now=$(($(date +%s) - start))
  if [ "$now" -ge "$budget" ]; then
    echo "[$now s] $name: SKIPPED (the ${budget} s budget is spent)"
    status=1
    return
  fi
  local t0=$(date +%s) rc
  "$bench" "$file" --size "$size" --json-out "$out/$name.json" "$@" >"$out/$name.txt" 2>"$out/$name.log"
  rc=$?
  echo "[$(($(date +%s) - start)) s] $name: exit $rc in $(($(date +%s) - t0)) s ($out/$name.txt)"
  [ "$rc" -eq 0 ] || { status=1; tail -3 "$out/$name.log"; }
}

echo "ferry-bench acceptance set: $bench, file $file ($size), results in $out"
"$ferry" --version >"$out/version.txt" 2>&1
nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1 || true

step read-hot --cache hot --repeats 3 --verify --routes staged,auto,cufile,host --baselines copy,pread,naive
step read-cold --cache cold --cold-repeats 2 --routes staged,auto,cufile --baselines copy,pread,naive
step sweep --cache hot --repeats 3 --routes staged --baselines copy,pread --threads 4,8,16 \
  --task-size 1MiB,4MiB,8MiB
# The data file exists (the reads used it): writing over it needs --overwrite.
step write --op write --overwrite --write-io both --sync end --repeats 2 --verify --routes staged --baselines copy,pwrite

py=$(command -v python3 || echo /usr/bin/python3)
"$py" - "$out" <<'EOF' || { echo "(no python3: see the .txt tables)"; grep -h -A12 "^targets:" "$out"/*.txt; }
import glob, json, os, sys
out = sys.argv[1]
rows, targets = [], []
for name in ["read-hot", "read-cold", "sweep", "write"]:
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        continue
    d = json.load(open(path))
    for r in d["results"]:
        if r["status"] != "ok":
            rows.append("%-9s %-7s %-8s %3s %6s  %s: %s" % (name, r["name"], r["condition"] or "-", r["threads"] or "-",
                        (str((r["task_size"] or 0) >> 20) + "MiB") if r["task_size"] else "-", r["status"], r["reason"][:70]))
            continue
        ratios = " ".join("%s=%.2f" % (k, v) for k, v in sorted(r["ratios"].items()))
        first = "%.2f" % r["first_run"]["gib_per_s"] if r["first_run"] else "-"
        rows.append("%-9s %-7s %-8s %3s %6s %7.2f %6.1f%% %8.3f %7s  %s" % (
            name, r["name"] + ("*" if r["default_settings"] else ""), r["condition"] or "-", r["threads"] or "-",
            (str(r["task_size"] >> 20) + "MiB") if r["task_size"] else "-", r["median_gib_per_s"],
            r["gib_per_s"]["spread_pct"], r["cpu_s_per_gib"], first, ratios))
    for t in d["targets"]:
        targets.append("%s %-80s %7.2fx (want >= %.2fx)" % ("PASS" if t["pass"] else "FAIL", t["name"], t["measured"], t["want"]))
    for w in d["warnings"]:
        targets.append("WARNING (%s): %s" % (name, w))
print()
print("%-9s %-7s %-8s %3s %6s %7s %7s %8s %7s  %s" % ("step", "name", "cond", "thr", "task", "GiB/s", "spread",
      "cpu s/GiB", "first", "ratios (median / best reference median)"))
print("\n".join(rows))
print()
print("\n".join(targets) if targets else "no targets (no GPU measurements?)")
EOF
echo "total $(($(date +%s) - start)) s; JSON, tables and logs in $out"
exit $status
