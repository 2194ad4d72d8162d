#!/usr/bin/env bash
# --json with file names that are not UTF-8 (issue 10: every subcommand aborted with SIGABRT, after `write`
# had written). Names are encoded as Python's surrogateescape does: json.loads() + os.fsencode() give back
# the exact bytes. Usage: json_names_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

bad="$dir/$(printf 'bad-\xff\xfe-caf\xc3\xa9.bin')"

# json_has_path NAME KEY_PATH OUTPUT: the JSON parses, and os.fsencode of the value at KEY_PATH (dot-separated)
# is the bad name's bytes.
json_has_path() {
  local name=$1 keys=$2 out=$3
  if "$py" -c 'import json, os, sys
d = json.loads(sys.argv[1])
for k in sys.argv[2].split("."):
    d = d[k]
assert os.fsencode(d) == os.fsencode(sys.argv[3]), (d, sys.argv[3])' "$out" "$keys" "$bad" 2>"$dir/py.err"; then
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
out=$("$ferry" bench "$bad" --size 64KiB --routes host --baselines none --repeats 1 --no-progress --json 2>&1); rc=$?
[ "$rc" = 0 ] && pass "bench --json exits 0" || fail "bench --json exits $rc: ${out:0:300}"
json_has_path "bench --json carries the name" plan.file "$out"
# A message that quotes the name (a missing file) in doctor's JSON.
out=$("$ferry" doctor "$bad.missing" --json 2>&1)
"$py" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["prediction"]["read_works"] is False' "$out" \
  && pass "doctor --json on a missing non-UTF-8 name parses" || fail "doctor --json, missing: ${out:0:300}"

rm -rf "$dir"
finish
