#!/usr/bin/env bash
# The forced-route matrix of the GPU routes issue, run with the real `ferry` on a GPU machine:
# each policy's route, reason and cuFile counters, with and without the udev record cuFile needs.
# Usage: scripts/gpu-route-matrix.sh FERRY_BINARY DATA_DIR [SIZE]. Exit 0 when every row is as expected,
# 77 when there is no GPU. Prints one line per case and writes DATA_DIR/matrix.jsonl.
set -uo pipefail
ferry=$1
dir=$2
size=${3:-1GiB}
mkdir -p "$dir"
file="$dir/matrix.bin"
[ -f "$file" ] || "$ferry" write "$file" --size "$size" >/dev/null || exit 1
if ! "$ferry" read "$file" --size 4096 --device 0 --json >/dev/null 2>"$dir/probe.err"; then
  echo "SKIP: no usable GPU: $(cat "$dir/probe.err")"
  exit 77
fi
record="/run/udev/data/b$(stat -c '%Hd:%Ld' "$file")"
saved=""
[ -f "$record" ] && saved=$(cat "$record")
: > "$dir/matrix.jsonl"
failures=0

# run NAME EXPECT_EXIT CHECK_PY [env...] -- ferry args...
run() {
  local name=$1 want_rc=$2 check=$3
  shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local out err rc
  out=$(env "${envs[@]}" "$ferry" read "$file" --device 0 --json "$@" 2>"$dir/err.txt")
  rc=$?
  err=$(cat "$dir/err.txt")
  python3 - "$name" "$rc" "$want_rc" "$check" "$out" "$err" "$dir/matrix.jsonl" <<'PY'
import json, sys
name, rc, want_rc, check, out, err, log = sys.argv[1:8]
rc, want_rc = int(rc), int(want_rc)
doc = json.loads(out) if out.strip() else {}
rep = doc.get("report", {})
ops = {k: v["ops"] for k, v in rep.get("routes", {}).items() if v["ops"]}
reasons = [(r["route"], r["reason"], r["detail"]) for r in rep.get("reasons", [])]
cu = rep.get("cufile")
env = {"ops": ops, "reasons": reasons, "cufile": cu, "err": err, "rc": rc, "doc": doc}
ok = rc == want_rc and bool(eval(check, {}, env))
with open(log, "a") as f:
    f.write(json.dumps({"case": name, "ok": ok, "rc": rc, "ops": ops, "reasons": reasons, "cufile": cu,
                        "gib_per_s": doc.get("gib_per_s"), "stderr": err}) + "\n")
line = f"{'PASS' if ok else 'FAIL'} {name}: exit {rc}, ops {ops}"
if reasons: line += f", reason {reasons[0][1]}: {reasons[0][2][:160]}"
if cu: line += f", cuFile reads nvfs={cu['nvfs_reads']} posix={cu['posix_reads']} p2p={cu['p2p_reads']}"
if doc.get("gib_per_s"): line += f", {doc['gib_per_s']:.2f} GiB/s"
if err: line += f"\n     stderr: {err[:300]}"
print(line)
sys.exit(0 if ok else 1)
PY
  [ $? -eq 0 ] || failures=$((failures + 1))
}

echo "== with the udev record ($record)"
mkdir -p /run/udev/data
[ -n "$saved" ] || printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$(findmnt -n -o FSTYPE --target "$file")" > "$record"
run compat-on 0 "list(ops) == ['staged'] and reasons[0][1] == 'compat_mode_on'" -- --compat on
run compat-off 0 "list(ops) == ['cufile-posix'] and cufile['posix_reads'] > 0 and cufile['nvfs_reads'] == 0" -- --compat off
run compat-off-forced 0 "list(ops) == ['cufile-posix'] and cufile['posix_reads'] > 0" CUFILE_FORCE_COMPAT_MODE=true -- --compat off
run auto 0 "list(ops) == ['staged'] and reasons[0][1] == 'nvidia_fs_not_loaded'" -- --compat auto
run require-gds 4 "'require=gds' in err and 'no I/O was done' in err" -- --require-gds

echo "== without the udev record"
rm -f "$record"
run auto-no-udev 0 "list(ops) == ['staged'] and reasons[0][1] == 'cufile_handle_register_failed' and '5027' in reasons[0][2]" -- --compat auto
run off-no-udev 1 "'compat mode off requires cuFile' in err and '5027' in err" -- --compat off
[ -n "$saved" ] && printf '%s\n' "$saved" > "$record"
[ -z "$saved" ] && printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$(findmnt -n -o FSTYPE --target "$file")" > "$record"

echo "== $failures failing case(s)"
[ "$failures" -eq 0 ]
