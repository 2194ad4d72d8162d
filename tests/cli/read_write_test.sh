#!/usr/bin/env bash
# Issue 48: `ferry read` and `ferry write` spend no time the user did not ask for without showing and reporting
# it; a read that does not fit in memory says so and how to read a part; files without a size (/proc) are
# read to their end; counts of one are singular. Usage: read_write_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

# json_check NAME PYTHON_EXPR -- args...: runs ferry ARGS (which should print JSON), then evaluates PYTHON_EXPR with
# d = the document and rc = the exit status.
json_check() {
  local name=$1 expr=$2
  shift 3
  local out rc
  out=$("$ferry" "$@" 2>"$dir/stderr.txt")
  rc=$?
  if "$py" -c 'import json,sys; d=json.loads(sys.argv[1]); rc=int(sys.argv[2]); assert eval(sys.argv[3]), (rc, d)' \
      "$out" "$rc" "$expr" 2>"$dir/py.txt"; then
    pass "$name"
  else
    fail "$name: $(tail -c 600 "$dir/py.txt") stderr: $(head -c 300 "$dir/stderr.txt")"
  fi
}

file="$dir/data.bin"
"$ferry" write "$file" --size 8MiB >/dev/null || fail "could not write $file"

# --- read: the destination is not pre-faulted, so the time reported is the time waited -------------------
# (MADV_POPULATE_WRITE of a 4 GiB destination took 9.4 s under load, before the read and outside its time.)
if command -v strace >/dev/null 2>&1 && strace -f -o "$dir/strace.txt" -e trace=madvise "$ferry" read "$file" >/dev/null 2>&1 &&
   grep -q "MADV_HUGEPAGE" "$dir/strace.txt"; then
  grep -q "MADV_POPULATE_WRITE" "$dir/strace.txt" && fail "read pre-faults its destination: $(grep POPULATE "$dir/strace.txt")" ||
    pass "read does not pre-fault its destination (no MADV_POPULATE_WRITE)"
  strace -f -o "$dir/strace.txt" -e trace=madvise "$ferry" write "$dir/w.bin" --size 8MiB >/dev/null 2>&1
  grep -q "MADV_POPULATE_WRITE" "$dir/strace.txt" && fail "write pre-faults its source" ||
    pass "write does not pre-fault its source (the threads that fill it touch it)"
else
  skip "no pre-faulting (strace)" "strace is missing or cannot trace here"
fi
json_check "read --json: prepare_seconds, what it was, and the wall time" \
  'rc == 0 and d["bytes"] == 8 << 20 and d["prepare_seconds"] >= 0 and "allocating 8.00 MiB of host memory" in d["prepare"] and d["wall_seconds"] >= d["seconds"] + d["setup_seconds"] + d["prepare_seconds"] and d["size_known"] is True and d["reads"] == 1' \
  -- read "$file" --json

# --- write: generating the data is shown and reported, apart from the write's own time ------------------------
json_check "write --json: prepare_seconds for generating the data, commit_seconds, the wall time" \
  'rc == 0 and d["prepare_seconds"] > 0 and d["prepare"] == "generating 64.00 MiB of data in host memory" and d["commit_seconds"] >= 0 and d["wall_seconds"] >= d["seconds"] + d["prepare_seconds"] + d["commit_seconds"]' \
  -- write "$dir/w.bin" --size 64MiB --no-sync --json
# 256 MiB takes milliseconds to generate on any machine: enough to be shown (the times have three decimals).
expect "write names the time spent generating the data" 0 \
  '^before the write: [0-9]+\.[0-9]{3} s generating 256.00 MiB of data in host memory$' -- write "$dir/w.bin" --size 256MiB --no-sync
expect "write names the time spent replacing the old file" 0 \
  '^after it: [0-9]+\.[0-9]{3} s renaming it over ".*w.bin" and syncing the directory$' -- write "$dir/w.bin" --size 256MiB
rm -f "$dir/w.bin"

# --- a destination that cannot be allocated: memory, and how to read a part --------------------------------
truncate -s 2GiB "$dir/sparse.bin"
if "$ferry" read "$file" --size 4096 --device 0 >/dev/null 2>&1; then
  skip "read of 2 GiB in 1 GiB of address space" "a GPU is usable here (its driver reserves address space)"
else
  out=$(ulimit -v 1048576 && "$ferry" read "$dir/sparse.bin" 2>&1); rc=$?
  if [ "$rc" = 1 ] && grep -qE '^ferry: unavailable: Could not allocate 2.00 GiB of host memory to read ".*sparse.bin" into \(read it in parts with --offset and --size, e\.g\. --size 1GiB\): Cannot allocate memory \(ENOMEM\)$' <<<"$out"; then
    pass "ENOMEM: memory, not disk space, and a hint to read a part"
  else
    fail "ENOMEM: exit $rc: ${out:0:400}"
  fi
  out=$(ulimit -v 1048576 && "$ferry" read "$dir/sparse.bin" --json 2>/dev/null)
  "$py" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["code"]=="unavailable" and d["errno"]["name"]=="ENOMEM" and "--offset and --size" in d["message"] and d["exit_status"]==1, d' "$out" \
    && pass "ENOMEM --json: code unavailable, errno ENOMEM" || fail "ENOMEM --json: ${out:0:300}"
  out=$(ulimit -v 1048576 && "$ferry" read "$dir/sparse.bin" --offset 1GiB --size 64MiB 2>&1); rc=$?
  [ "$rc" = 0 ] && pass "a part of it reads" || fail "a part: exit $rc: ${out:0:300}"
fi
rm -f "$dir/sparse.bin"

# --- files without a size are read to their end, and the output says so -----------------------------------
if [ -r /proc/cpuinfo ] && [ "$(stat -c %s /proc/cpuinfo)" = 0 ]; then
  want=$(wc -c </proc/cpuinfo)
  json_check "/proc/cpuinfo is read to its end" \
    "rc == 0 and d['bytes'] == $want and d['size_known'] is False and 'has no size' in d['note'] and d['report']['total_bytes'] == $want" \
    -- read /proc/cpuinfo --json
  expect "/proc/cpuinfo: the note" 0 '^note: "/proc/cpuinfo" has no size \(it reports 0 bytes\): read to its end' -- read /proc/cpuinfo
  json_check "/proc/cpuinfo --size 64k reads it all" "rc == 0 and d['bytes'] == $want and not d['size_clamped']" \
    -- read /proc/cpuinfo --size 64k --json
  json_check "/proc/cpuinfo --size 100 reads 100 bytes" "rc == 0 and d['bytes'] == 100 and '--size asks for' in d['note']" \
    -- read /proc/cpuinfo --size 100 --json
else
  skip "/proc/cpuinfo" "no /proc/cpuinfo without a size here"
fi
# A source that never ends: up to --size, the buffer grown as it fills.
json_check "/dev/zero --size 1MiB: 1 MiB in several reads" \
  'rc == 0 and d["bytes"] == 1 << 20 and d["reads"] > 1 and "--size asks for" in d["note"]' -- read /dev/zero --size 1MiB --json
: >"$dir/empty.bin"
out=$("$ferry" read "$dir/empty.bin" 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q '^read 0 B of' <<<"$out" && ! grep -q "has no size" <<<"$out" && pass "an empty file reads 0 B, without a note" ||
  fail "empty file: exit $rc: ${out:0:300}"

# --- counts of one, and no empty line ---------------------------------------------------------------------
expect "settings: 1 thread" 0 '^settings: 1 thread, ' -- read "$file" --threads 1
expect "a read of nothing has no set-up" 0 '^one-time set-up in this process: none$' -- read "$file" --offset 16MiB

rm -rf "$dir"
finish
