#!/usr/bin/env bash
# `ferry doctor` as a shell user meets it, on whatever machine runs it: without a usable GPU it must say so,
# predict `host` and exit 0 (4 with --require-gds); with a GPU it must predict a device route and prove it
# with --probe. Usage: doctor_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"
# The text report wraps at 100 columns: match against it with line breaks and indents folded to spaces.
fold_output=1

# check NAME PYTHON_EXPR -- args...: runs ferry doctor --json and evaluates PYTHON_EXPR with d = the document
# and rc = the exit status.
check() {
  local name=$1 expr=$2
  shift 3
  local out rc
  out=$("$ferry" doctor --json "$@" 2>"$dir/stderr.txt")
  rc=$?
  if "$py" -c 'import json,sys; d=json.loads(sys.argv[1]); rc=int(sys.argv[2]); assert eval(sys.argv[3]), (rc, d.get("prediction"), d.get("probe"), d.get("exit_reason"))' \
      "$out" "$rc" "$expr" 2>"$dir/py.txt"; then
    pass "$name"
  else
    fail "$name: $(tail -c 800 "$dir/py.txt") stderr: $(head -c 300 "$dir/stderr.txt")"
  fi
}

file="$dir/doctor.bin"
head -c 5000000 /dev/zero > "$file"

# Does this machine have a GPU Ferry can use? The doctor itself says, and `ferry read --device 0` agrees.
if "$ferry" read "$file" --size 4096 --device 0 >/dev/null 2>&1; then gpu=1; else gpu=0; fi
echo "GPU usable: $gpu"

check "--json parses, schema and sections" \
  'd["schema"] == "ferry.doctor/1" and [s["id"] for s in d["sections"]] == ["cuda","cufile","nvidia_fs","platform","file","settings"] and rc == d["exit_status"]' \
  -- "$file"
check "settings carry their source" \
  'any(c["name"] == "compat_mode" and "[api]" in c["summary"] for s in d["sections"] if s["id"] == "settings" for c in s["checks"])' \
  -- "$file" --compat on
check "a default sized from the machine says what it saw" \
  'any(c["name"] == "threads" and any("the cores this process may use: " in e for e in c["evidence"]) for s in d["sections"] if s["id"] == "settings" for c in s["checks"])' \
  -- "$file"
if [ "$gpu" = 0 ]; then
  expect "no GPU: says so and predicts host" 0 "no usable CUDA driver.*|will take route host, because no GPU is usable" -- doctor "$file"
  expect "no GPU: the prediction paragraph" 0 "will take route host, because no GPU is usable" -- doctor "$file"
  expect "no GPU, no PATH" 0 "into host memory will take route host" -- doctor
  check "no GPU: JSON prediction is host" \
    'rc == 0 and d["prediction"]["route"] == "host" and d["prediction"]["reason"] == "buffer_is_host_memory" and d["sections"][0]["status"] == "problem"' \
    -- "$file"
  expect "no GPU: --require-gds exits 4" 4 "require=gds|direct route is not available" -- doctor --require-gds "$file"
  # Issue 48 (B16): a verdict first, computed from the checks; the loader's error once; no warning about what
  # only cuFile needs when cuFile is absent too.
  out=$("$ferry" doctor "$file" 2>&1)
  head -1 <<<"$out" | grep -qE '^verdict: (no GPU here|NVIDIA GPUs on the PCI bus, but no usable CUDA driver): host reads work \(route host\); nothing to fix for host memory' &&
    pass "no GPU: the first line is the verdict" || fail "no GPU: first line: $(head -2 <<<"$out")"
  n=$(grep -o "libcuda.so.1 not found" <<<"$out" | wc -l)
  [ "$n" -le 1 ] && pass "no GPU: the loader's error is quoted once ($n)" || fail "no GPU: the loader's error $n times"
  check "no GPU: JSON verdict" 'd["verdict"].endswith("nothing to fix for host memory") or "nothing to fix for host memory (" in d["verdict"]' -- "$file"
  if ! "$py" -c 'import ctypes; ctypes.CDLL("libcufile.so.0")' 2>/dev/null; then
    check "no cuFile: no warning about the udev record or nvidia-fs" \
      'all(c["status"] != "warning" for s in d["sections"] if s["id"] in ("file", "nvidia_fs") for c in s["checks"] if c["name"] in ("udev record", "kernel module"))' \
      -- "$file"
  fi
  check "no GPU: --probe proves host" \
    'rc == 0 and d["probe"]["ran"] and d["probe"]["matches_prediction"] and d["probe"]["report"]["routes"]["host"]["ops"] == d["probe"]["report"]["total_ops"] > 0' \
    -- "$file" --probe
else
  check "GPU: predicts a device route" \
    'rc == 0 and d["prediction"]["target"] == "GPU 0" and d["prediction"]["route"] in ("staged","cufile-posix","nvfs","p2p") and d["sections"][0]["status"] != "problem"' \
    -- "$file"
  expect "GPU: the first line is the verdict" 0 "^verdict: GPU 0: reads (work|take cuFile's direct route)" -- doctor "$file"
  check "GPU: --probe proves the prediction" \
    'rc == 0 and d["probe"]["ran"] and d["probe"]["matches_prediction"] and d["probe"]["report"]["routes"][d["prediction"]["route"]]["ops"] == d["probe"]["report"]["total_ops"] > 0' \
    -- "$file" --probe
  check "GPU: --require-gds exits 4 exactly when the route is not direct" \
    '(rc == 0) == d["prediction"]["direct"] and rc in (0, 4)' -- "$file" --require-gds
  check "GPU: compat on stages" \
    'rc == 0 and d["prediction"]["route"] == "staged" and d["prediction"]["reason"] == "compat_mode_on"' -- "$file" --compat on
fi

# Errors a shell user meets.
expect "missing PATH" 1 "could not be opened|No such file or directory" -- doctor "$dir/nope.bin"
check "missing PATH in JSON" 'rc == 1 and d["prediction"]["read_works"] is False and d["prediction"]["reason"] == "not_found"' \
  -- "$dir/nope.bin"
expect "--probe needs PATH" 2 "--probe needs a PATH" -- doctor --probe
expect "bad --compat" 2 "--compat: cannot use \"sometimes\"" -- doctor "$file" --compat sometimes
expect "negative --device" 2 "--device: cannot use \"-1\" \(expected a GPU ordinal" -- doctor --device -1
expect "doctor help documents exit statuses" 0 "Exit status: 0 the requested route is available" -- doctor --help
# Human output fits 100 columns.
wide=$("$ferry" doctor "$file" 2>/dev/null | awk 'length > 100' | head -3)
[ -z "$wide" ] && pass "text fits 100 columns" || fail "text wider than 100 columns: $wide"

finish
