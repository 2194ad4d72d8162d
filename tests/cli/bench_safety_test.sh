#!/usr/bin/env bash
# `ferry-bench` never changes a file it did not create without --overwrite (issue 10: a read benchmark
# replaced a shorter file with generated data). Usage: bench_safety_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

quick=(--routes host --baselines none --repeats 1 --no-progress)

# A tiny file: too small to measure; refused, untouched.
echo data >"$dir/my.bin"
expect "a 5-byte file is refused, not replaced" 1 'Could not benchmark ".*my.bin": it holds 5 B, less than the 4 KiB' -- \
  bench "$dir/my.bin" --size 1MiB "${quick[@]}"
holds "it still holds its 5 bytes" test "$(cat "$dir/my.bin")" = data

# A shorter file: measured as it is (its size rounded down to 4 KiB), with a warning; untouched.
head -c 100000 /dev/urandom >"$dir/short.bin"
cp "$dir/short.bin" "$dir/short.copy"
expect "a shorter file is measured as it is" 0 'WARNING: ".*short.bin" holds 97.66 KiB, less than --size 1.00 MiB: measuring its first 96.00 KiB as it is' \
  -- bench "$dir/short.bin" --size 1MiB "${quick[@]}"
out=$("$bench" "$dir/short.bin" --size 1MiB "${quick[@]}" --verify --json)
if "$py" -c 'import json,sys; d=json.loads(sys.argv[1]); p=d["plan"]
assert p["size_bytes"] == 98304 and p["requested_size_bytes"] == 1 << 20 and p["file_created"] is False, p
h=[r for r in d["results"] if r["name"] == "host"][0]
assert h["status"] == "ok" and h["verify"]["ok"], h
assert any("less than --size" in w for w in d["warnings"]), d["warnings"]' "$out"; then
  pass "--json states the measured and the requested size"
else
  fail "--json: ${out:0:400}"
fi
holds "the shorter file is unchanged" cmp -s "$dir/short.bin" "$dir/short.copy"

# Writes into an existing file need --overwrite, which says what it destroys.
expect "--op write on an existing file is refused" 1 \
  'already_exists: Could not benchmark writes to ".*short.bin": it exists .* Add --overwrite' -- \
  bench "$dir/short.bin" --op write --size 64KiB "${quick[@]}"
holds "it is unchanged" cmp -s "$dir/short.bin" "$dir/short.copy"
expect "--op write --overwrite says what it overwrites" 0 \
  'ferry-bench: --overwrite: the first 64.00 KiB of ".*short.bin" \(it holds 97.66 KiB\) are overwritten with generated data' \
  -- bench "$dir/short.bin" --op write --overwrite --size 64KiB "${quick[@]}"
holds "it kept its length" test "$(stat -c %s "$dir/short.bin")" = 100000
expect "its first 64 KiB are the generated data" 0 "verify: OK" -- read "$dir/short.bin" --size 64KiB --verify
holds "the rest is as it was" cmp -s <(tail -c +65537 "$dir/short.bin") <(tail -c +65537 "$dir/short.copy")

# --overwrite for a read fills a shorter file to --size.
expect "read --overwrite fills a shorter file" 0 '--overwrite: ".*my.bin" \(it holds 5 B\) is filled to 1.00 MiB' -- \
  bench "$dir/my.bin" --size 1MiB --overwrite "${quick[@]}"
holds "it is --size long now" test "$(stat -c %s "$dir/my.bin")" = 1048576

# A missing file is created (and only then written over without --overwrite).
expect "a missing file is created" 0 "created with generated data" -- bench "$dir/new.bin" --op write --size 64KiB "${quick[@]}"
ls -A "$dir" | grep -qE 'ferry-partial|^\.ferry-' && fail "a temporary was left" || pass "no temporary left"
expect "bench --help documents --overwrite" 0 "--overwrite" -- bench --help

rm -rf "$dir"
finish
