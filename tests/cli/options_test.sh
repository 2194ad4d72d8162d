#!/usr/bin/env bash
# Options and settings a shell user can get wrong, and what ferry makes of them (issue 10): empty values,
# negative GPU ordinals, settings out of bounds, a bad FERRY_REQUIRE, read --size beyond the end of the file,
# errno names in messages. Usage: options_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

file="$dir/small.bin"
"$ferry" write "$file" --size 4KiB >/dev/null || fail "could not write $file"

# Empty values are refused, not taken as "not given".
expect "read --size ''" 2 '--size: cannot use "" \(an empty value' -- read "$file" --size ''
expect "read --offset ''" 2 '--offset: cannot use ""' -- read "$file" --offset ''
expect "write --size ''" 2 '--size: cannot use ""' -- write "$dir/x.bin" --size ''
expect "read --threads ''" 2 '--threads: cannot use ""' -- read "$file" --threads ''
expect "bench --size ''" 2 '--size: cannot use ""' -- bench "$file" --size ''
holds "write --size '' wrote nothing" test ! -e "$dir/x.bin"

# --device takes a GPU ordinal; host memory is "no --device".
expect "read --device -5" 2 '--device: cannot use "-5" \(expected a GPU ordinal: 0, 1, ...; leave --device out for host memory\)' \
  -- read "$file" --device -5
expect "write --device -1" 2 '--device: cannot use "-1"' -- write "$dir/x.bin" --size 1k --device -1
expect "bench --device -1" 2 '--device: cannot use "-1" .*for GPU 0' -- bench "$file" --device -1
expect "doctor --device -1" 2 '--device: cannot use "-1"' -- doctor --device -1

# Settings have bounds, named with the variable or option. A bad variable is a failure (exit 1, as
# `ferry doctor --help` documents), a bad option a bad command line (exit 2).
FERRY_THREADS=1024 expect "FERRY_THREADS=1024" 1 'FERRY_THREADS: cannot use "1024" \(expected a whole number from 1 to 256\)' -- read "$file"
expect "--threads 1024" 2 '--threads: cannot use "1024" \(expected a whole number from 1 to 256\)' -- read "$file" --threads 1024
expect "--task-size near 2^64" 2 '--task-size: cannot use "18446744073709551615" \(expected a size from 1 byte to 1.00 GiB' -- \
  read "$file" --task-size 18446744073709551615
FERRY_BOUNCE_BUFFER_SIZE=64GiB expect "FERRY_BOUNCE_BUFFER_SIZE=64GiB" 1 'FERRY_BOUNCE_BUFFER_SIZE: cannot use "64GiB"' -- read "$file"
FERRY_REQUIRE=always expect "FERRY_REQUIRE=always lists the choices" 1 'FERRY_REQUIRE: cannot use "always" \(expected one of none, gds\)' -- read "$file"
# Issue 48 (B23): an option wins over its variable, which is then not read; other bad variables still fail.
FERRY_TASK_SIZE=8Mi expect "--task-size wins over a bad FERRY_TASK_SIZE" 0 '4.00 MiB tasks' -- read "$file" --task-size 4M
FERRY_THREADS=lots expect "--threads wins over a bad FERRY_THREADS" 0 '^settings: 3 threads' -- read "$file" --threads 3
FERRY_COMPAT_MODE=sometimes expect "--compat wins over a bad FERRY_COMPAT_MODE" 0 'compat on' -- read "$file" --compat on
FERRY_REQUIRE=always expect "--require-gds wins over a bad FERRY_REQUIRE" 4 'require=gds: the direct GPUDirect Storage route' \
  -- read "$file" --require-gds
FERRY_TASK_SIZE=8Mi expect "a bad variable the options do not override still fails" 1 'FERRY_TASK_SIZE: cannot use "8Mi"' \
  -- read "$file" --threads 2
FERRY_TASK_SIZE=8Mi expect "FERRY_TASK_SIZE=8Mi in ferry write" 1 'FERRY_TASK_SIZE' -- write "$dir/env.bin" --size 4k
FERRY_TASK_SIZE=8Mi expect "FERRY_TASK_SIZE=8Mi in ferry load" 1 'FERRY_TASK_SIZE' -- load "$dir/none.safetensors"
FERRY_TASK_SIZE=8Mi expect "the doctor reports a bad variable with exit 1" 1 'FERRY_\* environment does not parse' -- doctor
FERRY_TASK_SIZE=8Mi expect "... also with --compat" 1 'FERRY_\* environment does not parse' -- doctor --compat on
fold_output=1  # help text wraps
expect "doctor --help documents exit 1 for it" 0 '1 a read as configured would fail \(.*a FERRY_\* variable does not' -- doctor --help
expect "ferry --help documents exit 1 for it" 0 '1 the operation failed \(.*FERRY_\* variable that does not parse' -- --help
fold_output=0

# Issue 48 (B17): an unknown option is named, with the closest known one, after "ferry:", exit 2.
expect "--sise: did you mean --size?" 2 '^ferry: unknown option --sise \(did you mean --size\?\)$' -- read "$file" --sise 4M
expect "--verfy=1: did you mean --verify?" 2 '^ferry: unknown option --verfy \(did you mean --verify\?\)$' -- read "$file" --verfy=1
expect "--frobnicate: where the options are" 2 '^ferry: unknown option --frobnicate \(ferry read --help lists the options\)$' \
  -- read "$file" --frobnicate
expect "another command's option" 2 '^ferry: unknown option --offset \(--offset is an option of ferry read; ferry write --help' \
  -- write "$dir/x.bin" --size 1k --offset 4
expect "ferry-bench: did you mean --repeats?" 2 '^ferry-bench: unknown option --repeat \(did you mean --repeats\?\)$' \
  -- bench "$file" --repeat 2
expect "an extra operand: ferry: prefix" 2 '^ferry: The following argument was not expected: extra \(ferry read --help' \
  -- read "$file" extra
expect "write --size '' says what to give" 2 '^ferry: --size: cannot use "" \(an empty value; give a size, e.g. 1GiB\)$' \
  -- write "$dir/x.bin" --size ''
out=$("$ferry" read "$file" --sise 4M --json 2>/dev/null)
"$py" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["exit_status"]==2 and d["message"]=="invalid_argument: unknown option --sise (did you mean --size?)", d' "$out" \
  && pass "--sise --json: the error object" || fail "--sise --json: ${out:0:300}"
expect "bench --threads 1024" 2 '--threads: cannot use "1024" \(expected numbers from 1 to 256' -- bench "$file" --threads 1024

# read --size is clamped to what the file holds from the offset.
expect "read --size 4GiB of a 4 KiB file" 0 '^read 4.00 KiB of' -- read "$file" --size 4GiB --verify
expect "read --size 4GiB says it was clamped" 0 \
  '^note: --size 4.00 GiB is more than the file holds from offset 0 \(4.00 KiB of 4.00 KiB\): reading 4.00 KiB$' -- \
  read "$file" --size 4GiB
out=$("$ferry" read "$file" --size 4GiB --offset 1KiB --json)
"$py" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["bytes"] == 3072 and d["requested_bytes"] == 4 << 30 and d["size_clamped"] is True, d' "$out" \
  && pass "read --json says it was clamped" || fail "read --json: ${out:0:300}"
if "$ferry" read "$file" --size 4096 --device 0 >/dev/null 2>&1; then
  skip "read --size 4GiB in 1 GiB of address space" "a GPU is usable here (its driver reserves address space)"
else
  out=$(ulimit -v 1048576 && "$ferry" read "$file" --size 4GiB 2>&1); rc=$?
  [ "$rc" = 0 ] && pass "read --size 4GiB needs no 4 GiB of memory" || fail "read under ulimit -v 1 GiB: exit $rc: ${out:0:300}"
fi

# errno values by name.
ln -s loop "$dir/loop"
expect "a symlink loop is named ELOOP" 1 '\(ELOOP\)' -- read "$dir/loop"
expect "a name too long is named ENAMETOOLONG" 1 '\(ENAMETOOLONG\)' -- read "$dir/$(printf 'n%.0s' $(seq 1 300))"

rm -rf "$dir"
finish
