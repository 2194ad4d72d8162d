#!/usr/bin/env bash
# --json with file names that are not UTF-8, for every command that prints JSON (read, write, doctor, load,
# and ferry-bench) and for the error object of each (issue 10: every subcommand aborted with SIGABRT, after
# `write` had written; issue 23: `load` still did, also for such a file inside a cleanly named directory). Names are encoded as Python's surrogateescape
# does: json.loads() + os.fsencode() give back the exact bytes. Usage: json_names_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

bad="$dir/$(printf 'bad-\xff\xfe-caf\xc3\xa9.bin')"

# json_has_path NAME KEY_PATH OUTPUT [EXPECTED]: the JSON parses, and os.fsencode of the value at KEY_PATH
# (dot-separated; numbers index lists) is the bytes of EXPECTED (default: the bad name).
json_has_path() {
  local name=$1 keys=$2 out=$3 want=${4:-$bad}
  if "$py" -c 'import json, os, sys
d = json.loads(sys.argv[1])
for k in sys.argv[2].split("."):
    d = d[int(k)] if isinstance(d, list) else d[k]
assert os.fsencode(d) == os.fsencode(sys.argv[3]), (d, sys.argv[3])' "$out" "$keys" "$want" 2>"$dir/py.err"; then
    pass "$name"
  else
    fail "$name: $(tail -2 "$dir/py.err") output: ${out:0:300}"
  fi
}

out=$("$ferry" write "$bad" --size 64KiB --json 2>&1); rc=$?
[ "$rc" = 0 ] && pass "write --json exits 0" || fail "write --json exits $rc: ${out:0:300}"
json_has_path "write --json carries the name" path "$out"
out=$("$ferry" read "$bad" --json 2>&1); rc=$?
[ "$rc" = 0 ] && pass "read --json exits 0" || fail "read --json exits $rc: ${out:0:300}"
json_has_path "read --json carries the name" path "$out"
out=$("$ferry" doctor "$bad" --json 2>&1); rc=$?
[ "$rc" = 0 ] || [ "$rc" = 4 ] && pass "doctor --json exits $rc" || fail "doctor --json exits $rc: ${out:0:300}"
json_has_path "doctor --json carries the name" path "$out"
out=$("$bench" "$bad" --size 64KiB --routes host --baselines none --repeats 1 --no-progress --json 2>&1); rc=$?
[ "$rc" = 0 ] && pass "bench --json exits 0" || fail "bench --json exits $rc: ${out:0:300}"
json_has_path "bench --json carries the name" plan.file "$out"
# A message that quotes the name (a missing file) in doctor's JSON.
out=$("$ferry" doctor "$bad.missing" --json 2>&1)
"$py" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["prediction"]["read_works"] is False' "$out" \
  && pass "doctor --json on a missing non-UTF-8 name parses" || fail "doctor --json, missing: ${out:0:300}"

# load: a checkpoint with such a name, and one found inside a cleanly named directory.
write_checkpoint() {
  "$py" - "$1" <<'PY'
import json, os, struct, sys
text = json.dumps({"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}).encode()
text += b" " * (-(8 + len(text)) % 8)
open(os.fsencode(sys.argv[1]), "wb").write(struct.pack("<Q", len(text)) + text + b"abcd")
PY
}
ckpt="$bad.safetensors"
write_checkpoint "$ckpt"
out=$("$ferry" load "$ckpt" --json 2>&1); rc=$?
[ "$rc" = 0 ] && pass "load --json exits 0" || fail "load --json exits $rc: ${out:0:300}"
json_has_path "load --json carries the name" path "$out" "$ckpt"
json_has_path "load --json lists the file" files.0 "$out" "$ckpt"
mkdir -p "$dir/clean"
inner="$dir/clean/$(printf 'model-\xff.safetensors')"
write_checkpoint "$inner"
out=$("$ferry" load "$dir/clean" --json --verify 2>&1); rc=$?
[ "$rc" = 0 ] && pass "load --json of a clean directory exits 0" || fail "load --json of a clean directory exits $rc: ${out:0:300}"
json_has_path "load --json names the file inside the directory" files.0 "$out" "$inner"

# The error object (ferry.error/1) names such a file too (doctor reports a missing file in its own document,
# above).
for cmd in read load; do
  out=$("$ferry" $cmd "$bad.missing" --json 2>/dev/null); rc=$?
  [ "$rc" = 1 ] && pass "$cmd --json of a missing name exits 1" || fail "$cmd --json of a missing name exits $rc: ${out:0:300}"
  json_has_path "$cmd --json error object carries the name" path "$out" "$bad.missing"
done
out=$("$bench" "$bad.missing/x.bin" --size 64KiB --no-progress --json 2>/dev/null); rc=$?
[ "$rc" = 1 ] && pass "ferry-bench --json into a missing directory exits 1" || fail "ferry-bench --json, missing directory: exit $rc: ${out:0:300}"
json_has_path "ferry-bench --json error object carries the name" path "$out" "$bad.missing/x.bin"
out=$("$ferry" doctor "$bad.missing" --probe --device -1 --json 2>/dev/null); rc=$?
[ "$rc" = 2 ] && "$py" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["schema"]=="ferry.error/1" and d["command"]=="doctor", d' "$out" \
  && pass "doctor --json usage error object parses" || fail "doctor --json usage error: exit $rc: ${out:0:300}"
out=$("$ferry" write "$bad.missing/x.bin" --size 4KiB --json 2>/dev/null); rc=$?
[ "$rc" = 1 ] && pass "write --json into a missing directory exits 1" || fail "write --json into a missing directory exits $rc: ${out:0:300}"
"$py" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["schema"]=="ferry.error/1" and d["command"]=="write", d' "$out" \
  && pass "write --json error object parses" || fail "write --json error object: ${out:0:300}"

rm -rf "$dir"
finish
