#!/usr/bin/env bash
# What scripts rely on: an unknown command is named with the list of commands (exit 2); every --json
# document has a "schema" key ("ferry.<command>/<n>"); with --json a failure also prints one ferry.error/1
# object on stdout, with the exit status it has without --json; `ferry --version` names Ferry's version and
# the CUDA driver's and cuFile's (or why each was not found) without opening cuFile's driver.
# Usage: contract_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

# json_check NAME PYTHON_EXPR -- args...: runs ferry, parses stdout as one JSON object `d` (exit status in `rc`,
# stderr in `err`) and passes when PYTHON_EXPR is true.
json_check() {
  local name=$1 check=$2
  shift 3
  local out err rc
  out=$(run_tool "$@" 2>"$dir/stderr")
  rc=$?
  err=$(cat "$dir/stderr")
  if "$py" - "$out" "$rc" "$err" "$check" <<'PY'
import json, sys
out, rc, err, check = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
lines = out.splitlines()
assert len(lines) == 1, "stdout is not one line: %r" % out[:600]
d = json.loads(lines[0])
assert eval(check), "%s is false for rc=%d d=%s err=%r" % (check, rc, json.dumps(d)[:600], err[:300])
PY
  then pass "$name"; else fail "$name"; fi
}

# 1. An unknown command: named, with the commands there are; exit 2 as every usage error.
expect "unknown command named with the list" 2 \
  'unknown command "frobnicate"; the commands are: read, write, doctor, load' -- frobnicate
expect "a mistyped command" 2 'unknown command "rd"' -- rd file.bin --json
json_check "unknown command with --json" \
  'rc == 2 and d["schema"] == "ferry.error/1" and d["code"] == "invalid_argument" and "frobnicate" in d["message"] and d["exit_status"] == 2 and d["command"] is None and "unknown command" in err' \
  -- frobnicate --json
expect "a known command still parses" 0 "wrote" -- write "$dir/a.bin" --size 64KiB

# 2. A schema in every --json document.
file="$dir/data.bin"
json_check "write --json has its schema" 'rc == 0 and d["schema"] == "ferry.write/1" and d["bytes"] == 1048576' \
  -- write "$file" --size 1MiB --json
json_check "read --json has its schema" 'rc == 0 and d["schema"] == "ferry.read/1" and d["bytes"] == 1048576' \
  -- read "$file" --json
json_check "doctor --json has its schema" 'd["schema"] == "ferry.doctor/1" and rc == d["exit_status"]' \
  -- doctor "$file" --json
json_check "bench --json has its schema" 'rc == 0 and d["schema"] == "ferry.bench/1"' \
  -- bench "$file" --size 1MiB --cache hot --repeats 1 --routes host --no-progress --json
"$py" - "$dir/t.safetensors" <<'PY'
import json, struct, sys
header = json.dumps({"w": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]}}).encode()
header += b" " * (-(8 + len(header)) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header + bytes(range(16)))
PY
json_check "load --json has its schema" 'rc == 0 and d["schema"] == "ferry.load/1"' -- load "$dir/t.safetensors" --json

# 3. Failures with --json: the error object on stdout, the same exit status as without --json, and stderr
#    as before.
json_check "missing file: error object" \
  'rc == 1 and d["schema"] == "ferry.error/1" and d["command"] == "read" and d["code"] == "not_found" and d["errno"] == {"name": "ENOENT", "number": 2} and d["path"].endswith("nope.bin") and d["exit_status"] == 1 and "ENOENT" in d["message"] and "not_found" in err' \
  -- read "$dir/nope.bin" --json
expect "missing file without --json: same status" 1 "not_found" -- read "$dir/nope.bin"
json_check "directory: error object" \
  'rc == 1 and d["code"] == "is_a_directory" and d["schema"] == "ferry.error/1"' -- read "$dir" --json
json_check "bad size: usage error object, exit 2" \
  'rc == 2 and d["code"] == "invalid_argument" and d["errno"] is None and "--size" in d["message"] and "--size" in err' \
  -- read "$file" --size 4XB --json
json_check "unknown option: usage error object, exit 2" \
  'rc == 2 and d["code"] == "invalid_argument" and "--frobnicate" in d["message"] and d["command"] == "read"' \
  -- read "$file" --frobnicate --json
json_check "write to a directory: error object" \
  'rc == 1 and d["command"] == "write" and d["schema"] == "ferry.error/1" and d["exit_status"] == 1' \
  -- write "$dir" --size 1k --json
json_check "load of a missing checkpoint: error object" \
  'rc == 1 and d["command"] == "load" and d["code"] == "not_found"' -- load "$dir/none.safetensors" --json
json_check "doctor --probe without PATH: error object" \
  'rc == 2 and d["command"] == "doctor" and d["code"] == "invalid_argument"' -- doctor --probe --json
json_check "ferry-bench unknown option: usage error object, exit 2" \
  'rc == 2 and d["command"] == "bench" and d["code"] == "invalid_argument" and d["message"].startswith("invalid_argument: unknown option --frobnicate") and err.startswith("ferry-bench: unknown option --frobnicate")' \
  -- bench "$file" --frobnicate --json
json_check "ferry-bench on a directory: error object, exit 1" \
  'rc == 1 and d["command"] == "bench" and d["code"] == "is_a_directory" and err.startswith("ferry-bench: ")' \
  -- bench "$dir" --size 1MiB --json --no-progress
out=$("$ferry" read "$dir/nope.bin" 2>/dev/null)
[ -z "$out" ] && pass "without --json a failure prints nothing on stdout" || fail "stdout without --json: $out"
out=$("$ferry" bench "$file" 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q 'unknown command "bench"' <<<"$out" && pass "the benchmark is ferry-bench, not a ferry command" ||
  fail "ferry bench: exit $rc: $out"

# 3b. Interrupted (issue 48): SIGINT ends the command with exit status 130 and, with --json, one error object
#     (code "cancelled") on stdout; a message on stderr either way. The read waits on a server that accepts
#     the connection and never answers, so the signal lands while it runs. Background jobs of a script start
#     with SIGINT ignored (ferry leaves an ignored signal ignored): python restores the default first.
cat >"$dir/stall.py" <<'PY'
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
__import__("os").rename(sys.argv[1] + ".tmp", sys.argv[1])
held = []
while True:
    held.append(s.accept()[0])
    open(sys.argv[1] + ".accepted", "a").write("1\n")
PY
# interrupted SIG [--json]: runs `ferry read URL [--json]` against the stalling server and sends SIG
# once the server has the connection; leaves stdout in $dir/int.out, stderr in $dir/int.err and the status in rc.
interrupted() {
  local sig=$1
  shift
  rm -f "$dir/port" "$dir/port.accepted"
  "$py" "$dir/stall.py" "$dir/port" & local server=$!
  for _ in $(seq 1 200); do [ -e "$dir/port" ] && break; sleep 0.02; done
  "$py" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
    "$ferry" read "http://127.0.0.1:$(cat "$dir/port")/shard.bin" "$@" >"$dir/int.out" 2>"$dir/int.err" &
  local pid=$! got=0
  for _ in $(seq 1 500); do [ -e "$dir/port.accepted" ] && got=1 && break; sleep 0.02; done
  kill "-$sig" "$pid"
  wait "$pid"
  rc=$?
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  return $((1 - got))
}
if interrupted INT --json; then
  out=$(cat "$dir/int.out")
  "$py" -c 'import json,sys; lines=sys.argv[1].splitlines(); assert len(lines)==1, lines; d=json.loads(lines[0]); assert d["schema"]=="ferry.error/1" and d["command"]=="read" and d["code"]=="cancelled" and d["exit_status"]==130 and "SIGINT" in d["message"], d' "$out" \
    && [ "$rc" = 130 ] && pass "SIGINT with --json: exit 130 and one cancelled error object" ||
    fail "SIGINT with --json: exit $rc, stdout: ${out:0:300}, stderr: $(head -c 300 "$dir/int.err")"
  grep -q "^ferry: cancelled: interrupted by SIGINT$" "$dir/int.err" && pass "SIGINT: stderr says so" ||
    fail "SIGINT: stderr: $(head -c 300 "$dir/int.err")"
else
  skip "SIGINT with --json" "the read never reached the local server (rc $rc: $(head -c 200 "$dir/int.err"))"
fi
if interrupted TERM; then
  [ "$rc" = 143 ] && [ ! -s "$dir/int.out" ] && grep -q "^ferry: cancelled: interrupted by SIGTERM$" "$dir/int.err" &&
    pass "SIGTERM without --json: exit 143, a message, nothing on stdout" ||
    fail "SIGTERM: exit $rc, stdout: $(head -c 200 "$dir/int.out"), stderr: $(head -c 300 "$dir/int.err")"
else
  skip "SIGTERM" "the read never reached the local server"
fi

# 4. --version: the three lines, quickly, whatever this machine has.
start=$(date +%s%N)
out=$("$ferry" --version 2>&1)
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [ "$rc" -eq 0 ] && grep -qE '^ferry [0-9]+\.[0-9]+\.[0-9]+$' <<<"$(head -1 <<<"$out")" &&
   grep -qE '^CUDA driver: ([0-9]+\.[0-9]+ \(cuDriverGetVersion [0-9]+, .*\)|not found \(.+\)|.* loaded, but .*)$' <<<"$out" &&
   grep -qE '^cuFile: ([0-9]+ \(cuFileGetVersion, .*\)|not found \(.+\)|.* loaded, .*)$' <<<"$out"; then
  pass "--version names ferry, the CUDA driver and cuFile ($ms ms): $(tr '\n' '|' <<<"$out")"
else
  fail "--version: exit $rc: $out"
fi

# --version with stand-in libraries: the versions they report, and cuFile's driver never opened (the stand-in
# cuFileDriverOpen would leave a file behind).
if command -v cc >/dev/null 2>&1; then
  stub="$dir/stub"
  mkdir -p "$stub"
  src_root="$(cd "$(dirname "$0")/../.." && pwd)"
  # Every entry point of Ferry's list (src/platform/cuda/cuda_symbols.hpp) as a stub failing with 999, but
  # cuDriverGetVersion, which answers 12.4: the preprocessor reads the list, so the stub follows it.
  cat >"$stub/cuda.c" <<'C'
#include "platform/cuda/cuda_symbols.hpp"
#define cuDriverGetVersion unused_cuDriverGetVersion
#define STUB(need, symbol, result, parameters) int symbol(void) { return 999; }
FERRY_CUDA_DRIVER_SYMBOLS(STUB)
#undef cuDriverGetVersion
int cuDriverGetVersion(int* v) { *v = 12040; return 0; }
C
  cat >"$stub/cufile.c" <<'C'
#include <stdio.h>
typedef struct { int err; int cu_err; } result;
static result ok(void) { result r = {0, 0}; return r; }
result cuFileDriverOpen(void) {
  FILE* f = fopen(getenv("STUB_DRIVER_OPENED"), "w");
  if (f) fclose(f);
  return ok();
}
result cuFileGetVersion(int* v) { *v = 1150; return ok(); }
result cuFileDriverClose_v2(void) { return ok(); }
result cuFileDriverGetProperties(void* p) { (void)p; return ok(); }
result cuFileHandleRegister(void* a, void* b) { (void)a; (void)b; return ok(); }
void cuFileHandleDeregister(void* a) { (void)a; }
long cuFileRead(void) { return -1; }
long cuFileWrite(void) { return -1; }
C
  sed -i '1i #include <stdlib.h>' "$stub/cufile.c"
  if cc -shared -fPIC -I "$src_root/src" -o "$stub/libcuda.so.1" "$stub/cuda.c" 2>"$stub/cc.err" &&
     cc -shared -fPIC -o "$stub/libcufile.so.0" "$stub/cufile.c" 2>>"$stub/cc.err"; then
    out=$(STUB_DRIVER_OPENED="$stub/driver-opened" LD_LIBRARY_PATH="$stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$ferry" --version 2>&1)
    if grep -q '^CUDA driver: 12.4 (cuDriverGetVersion 12040, libcuda.so.1)$' <<<"$out" &&
       grep -q '^cuFile: 1150 (cuFileGetVersion, libcufile.so.0)$' <<<"$out"; then
      pass "--version reports the versions the libraries give"
    else
      fail "--version with stand-in libraries: $out"
    fi
    [ ! -e "$stub/driver-opened" ] && pass "--version does not open cuFile's driver" ||
      fail "--version called cuFileDriverOpen"
  else
    skip "--version with stand-in libraries" "cc could not build them: $(head -3 "$stub/cc.err")"
  fi
else
  skip "--version with stand-in libraries" "no C compiler (cc) here"
fi

finish
