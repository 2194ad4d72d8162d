# Sourced by the CLI test scripts (tests/cli/*_test.sh): arguments, scratch directory, PASS/FAIL lines and
# `expect`. The including script sets `fold_output=1` before `expect` to match across wrapped lines.
# Usage in a script: source "$(dirname "$0")/cli_test_lib.sh" "$@"
# `bench` is ferry-bench, the benchmark's own program, which is built (and installed) beside ferry; in
# `expect`, `-- bench ARGS...` runs it.
ferry=$1
bench=$(dirname "$1")/ferry-bench
dir=$2
rm -rf "$dir" && mkdir -p "$dir"
failures=0
fold_output=0
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

# run_tool ARGS...: ferry ARGS, or ferry-bench REST for `bench REST`.
run_tool() {
  if [ "${1:-}" = bench ]; then
    shift
    "$bench" "$@"
  else
    "$ferry" "$@"
  fi
}

# expect NAME WANT_RC PATTERN -- args...: runs ferry (run_tool), checks the exit status and that stdout+stderr
# match PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc text
  out=$(run_tool "$@" 2>&1)
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

# skip NAME WHY: a check that cannot run here, and why (the script still runs the others).
skip() { echo "SKIP $1: $2"; }

# Another user for the tests that need one (an attacker planting files, a caller without root's rights):
# `other_setup` (call it once) succeeds where the tests run as root with setpriv, and then `as_other CMD...`
# runs CMD as nobody (uid/gid 65534). It sets `odir`, a scratch directory nobody can reach (the script's
# own when nobody can reach it and ferry, else a fresh one under ${TMPDIR:-/tmp} with a copy of ferry and
# ferry-bench: `oferry`), and `other_cleanup` removes the fresh one.
as_other() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
other_setup() {
  [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && as_other true 2>/dev/null || return 1
  odir_fresh=0
  if as_other test -x "$dir" -a -x "$ferry" 2>/dev/null; then
    odir=$dir/other
    oferry=$ferry
  else
    odir=$(mktemp -d "${TMPDIR:-/tmp}/ferry-cli-test.XXXXXX") || return 1
    odir_fresh=1
    cp "$ferry" "$odir/ferry" && cp "$bench" "$odir/ferry-bench" || return 1
    oferry=$odir/ferry
  fi
  mkdir -p "$odir" && chmod 0755 "$odir" && as_other test -x "$odir" -a -x "$oferry"
}
other_cleanup() { [ "${odir_fresh:-0}" = 1 ] && rm -rf "$odir"; true; }

# expect_as_other NAME WANT_RC PATTERN -- args...: `expect`, with ferry run as the other user.
expect_as_other() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc program=$oferry
  if [ "${1:-}" = bench ]; then
    program=$(dirname "$oferry")/ferry-bench
    shift
  fi
  out=$(as_other "$program" "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$name: exit $rc, wanted $want; output: ${out:0:600}"
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    fail "$name: output lacks /$pattern/: ${out:0:600}"
  else
    pass "$name"
  fi
}

# holds NAME COMMAND...: passes when COMMAND succeeds.
holds() {
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

# finish: the closing line, and the exit status of the script.
finish() {
  echo "== $failures failure(s)"
  [ "$failures" -eq 0 ]
}
