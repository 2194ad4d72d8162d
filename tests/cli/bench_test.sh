#!/usr/bin/env bash
# `ferry-bench` on a small file: host route and CPU baselines measured, JSON with the documented keys, --verify,
# the cold-cache method reported, device rows skipped with a reason where there is no GPU (and measured where
# there is one), writes with their sync policy, progress lines, usage errors.
# Usage: bench_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

file="$dir/bench.bin"

# 1. Reads, hot and cold, every route and baseline, JSON.
"$bench" "$file" --size 64MiB --cache both --repeats 2 --cold-repeats 1 --verify --json \
  --json-out "$dir/read.json" >"$dir/read.out" 2>"$dir/read.err"
rc=$?
if [ "$rc" -eq 0 ]; then pass "bench read exits 0"; else fail "bench read exits $rc: $(tail -5 "$dir/read.err")"; fi
[ "$(stat -c %s "$file" 2>/dev/null)" = 67108864 ] && pass "the file was created at --size" || fail "file size $(stat -c %s "$file" 2>/dev/null)"
ls -A "$dir" | grep -qE 'ferry-partial|^\.ferry-' && fail "a partial file was left behind" || pass "no partial file left"
if "$py" - "$dir/read.out" "$dir/read.json" <<'EOF'
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert d == json.load(open(sys.argv[2])), "--json and --json-out differ"
assert d["schema"] == "ferry.bench/1", d["schema"]
env = d["environment"]
for k in ["kernel", "cpus", "file_system", "ferry_version", "build", "cuda_status", "cufile_status", "gpu",
          "cuda_driver_version", "cufile_version", "ferry_defaults", "time_utc"]:
    assert k in env, "environment lacks " + k
assert env["cpus"] >= 1 and env["build"]["optimized"] in (True, False)
plan = d["plan"]
assert plan["size_bytes"] == 64 << 20 and plan["file_created"] is True and plan["conditions"] == ["hot", "cold"], plan
assert plan["repeats"] == 2 and plan["cold_repeats"] == 1 and plan["verify"] is True
gpu = env["gpu"] is not None
res = d["results"]
keys = ["name", "kind", "memory", "condition", "threads", "task_size", "status", "reason", "median_gib_per_s",
        "gib_per_s", "cpu_s_per_gib", "runs", "first_run", "ratios", "route_summary", "report", "verify", "notes",
        "condition_detail", "default_settings", "setup_seconds"]
for r in res:
    for k in keys:
        assert k in r, "%s lacks %s" % (r["name"], k)
    assert r["status"] in ("ok", "skipped"), (r["name"], r["condition"], r["status"], r["reason"])
    if r["status"] == "skipped":
        assert r["reason"], "a skip without a reason: %s" % r["name"]
    else:
        assert r["median_gib_per_s"] > 0 and r["cpu_s_per_gib"] is not None, r["name"]
        s = r["gib_per_s"]
        assert s["min"] <= s["median"] <= s["max"], s
        want = 1 if r["condition"] == "cold" else 2
        assert len(r["runs"]) == want, (r["name"], r["condition"], len(r["runs"]))
def find(name, cond):
    return [r for r in res if r["name"] == name and r["condition"] == cond]
for cond in ["hot", "cold"]:
    host = find("host", cond)
    assert len(host) == 1 and host[0]["status"] == "ok", host
    h = host[0]
    assert h["verify"]["ok"] is True, h["verify"]
    assert h["first_run"]["gib_per_s"] > 0 and h["default_settings"] is True
    assert h["report"]["routes"]["host"]["ops"] == 16, h["report"]["routes"]
    assert "all host" in h["route_summary"], h["route_summary"]
    assert "io" in h["ratios"] and "naive" in h["ratios"], h["ratios"]
    p = find("pread", cond)
    assert len(p) == 1 and p[0]["status"] == "ok", p
    n = find("naive", cond)
    assert len(n) == 1 and n[0]["status"] == "ok", n
    for route in ["staged", "cufile"]:
        rr = find(route, cond)
        assert len(rr) == 1, rr
        if not gpu:
            assert rr[0]["status"] == "skipped" and "GPU" in rr[0]["reason"], rr[0]["reason"]
        elif rr[0]["status"] == "ok":
            assert rr[0]["verify"]["ok"] is True, rr[0]["verify"]
    assert "hot" != cond or "page cache" in h["condition_detail"], h["condition_detail"]
cold = find("host", "cold")[0]["condition_detail"]
assert cold.startswith("drop_caches") or cold.startswith("fadvise_dontneed"), cold
copy = [r for r in res if r["name"] == "copy"]
assert len(copy) == 1 and (copy[0]["status"] == "ok") == gpu, copy
if gpu:
    assert any(t["name"].startswith("hot read") for t in d["targets"]), d["targets"]
print("json ok; cold method:", cold.split(":")[0])
EOF
then pass "bench --json has the documented keys and values"
else fail "bench --json: $(head -c 600 "$dir/read.out")"
fi
grep -qE "run 1/2" "$dir/read.err" && pass "progress: a line per run when stderr is not a terminal" \
  || fail "no progress lines: $(head -c 300 "$dir/read.err")"

# 2. The table, on an existing file (not created again), with a thread and task-size sweep.
expect "bench table" 0 "host\* +host hot +[0-9]+ +4MiB .* verified" -- bench "$file" --size 64MiB --routes host \
  --baselines pread --repeats 1 --verify --no-progress
expect "bench table names the sweep" 0 "pread +host hot +2 +1MiB" -- bench "$file" --size 64MiB --routes host \
  --baselines pread --threads 2,4 --task-size 1MiB,4MiB --repeats 1 --no-progress
out=$("$bench" "$file" --size 64MiB --routes host --baselines none --repeats 1 --no-progress 2>"$dir/np.err")
[ ! -s "$dir/np.err" ] && pass "--no-progress keeps stderr quiet" || fail "--no-progress printed: $(head -c 300 "$dir/np.err")"
grep -q "(created with generated data)" <<<"$out" && fail "an existing, large enough file was created again" \
  || pass "an existing file is reused"

# 3. Random order, one request per task.
expect "bench random" 0 "random order.*" -- bench "$file" --size 64MiB --pattern random --routes host \
  --baselines pread --task-size 1MiB --repeats 1 --verify --no-progress

# 4. Writes: buffered and O_DIRECT, the sync policy stated, the file read back.
expect "bench write" 0 "sync policy: one fdatasync" -- bench "$dir/w.bin" --op write --size 16MiB --routes host \
  --repeats 1 --verify --no-progress
# The file exists now: writing over it again needs --overwrite (bench_safety_test.sh).
expect "bench write rows" 0 "host\* +host direct .* verified" -- bench "$dir/w.bin" --op write --size 16MiB \
  --routes host --repeats 1 --verify --no-progress --overwrite
expect "bench write --sync none" 0 "sync policy: none" -- bench "$dir/w.bin" --op write --size 16MiB --routes host \
  --baselines none --write-io buffered --sync none --repeats 1 --no-progress --overwrite
expect "written file reads back" 0 "verify: OK" -- read "$dir/w.bin" --verify

# 4b. The first read in fresh processes (issue 11): one row per route, each run a spawned `ferry read`.
"$bench" "$file" --size 1MiB --routes host --baselines none --repeats 2 --first-read --json --no-progress \
  >"$dir/first.json" 2>"$dir/first.err"
if "$py" - "$dir/first.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["results"] if r["condition"] == "first-read"]
assert len(rows) == 1 and rows[0]["status"] == "ok", rows
assert len(rows[0]["runs"]) == 2 and all(run["bytes"] == 1 << 20 for run in rows[0]["runs"]), rows[0]["runs"]
assert "fresh processes" in rows[0]["notes"][-1], rows[0]["notes"]
EOF
then pass "bench --first-read measures fresh processes"; else fail "bench --first-read: $(tail -3 "$dir/first.err")"; fi
expect "first read needs reads" 2 "--first-read measures reads" -- bench "$file" --size 1MiB --op write --first-read

# 5. Usage errors.
expect "bad route" 2 "--routes: cannot use \"fast\"" -- bench "$file" --size 1MiB --routes host,fast
expect "bad baseline" 2 "--baselines: cannot use \"kvikio\"" -- bench "$file" --size 1MiB --baselines kvikio
expect "bad op" 2 "--op" -- bench "$file" --op append
expect "bad threads" 2 "--threads: cannot use \"x\"" -- bench "$file" --size 1MiB --threads 4,x
expect "zero repeats" 2 "--repeats: cannot use 0" -- bench "$file" --size 1MiB --repeats 0
expect "bad size" 2 "--size: cannot use \"4XB\"" -- bench "$file" --size 4XB
expect "a directory" 1 "not a regular file" -- bench "$dir" --size 1MiB --no-progress
expect "bench help" 0 "--cold-repeats" -- bench --help

rm -rf "$dir"
finish
