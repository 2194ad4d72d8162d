# Sourced by the CLI test scripts (tests/cli/*_test.sh): arguments, scratch directory, PASS/FAIL lines and
# `expect`. The including script sets `fold_output=1` before `expect` to match across wrapped lines.
# Usage in a script: source "$(dirname "$0")/cli_test_lib.sh" "$@"
ferry=$1
dir=$2
rm -rf "$dir" && mkdir -p "$dir"
failures=0
fold_output=0
py=$(command -v python3 || echo /usr/bin/python3)
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

# expect NAME WANT_RC PATTERN -- args...: runs ferry, checks the exit status and that stdout+stderr match PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc text
  out=$("$ferry" "$@" 2>&1)
  rc=$?
  text=$out
  [ "$fold_output" = 1 ] && text=$(tr '\n' ' ' <<<"$out" | tr -s ' ')
  if [ "$rc" -ne "$want" ]; then
    fail "$name: exit $rc, wanted $want; output: ${out:0:600}"
  elif ! grep -qE -- "$pattern" <<<"$text"; then
    fail "$name: output lacks /$pattern/: ${out:0:600}"
  else
    pass "$name"
  fi
}

# finish: the closing line, and the exit status of the script.
finish() {
  echo "== $failures failure(s)"
  [ "$failures" -eq 0 ]
}
