#!/usr/bin/env bash
# The CLI reaches the engine only through its public API (issue 14). Every #include in cli/ must be one of:
# a file of cli/ itself, a public header (include/ferry/...), the benchmark harness's interface
# (ferry_bench/harness.hpp), or ferry_tooling, the one documented internal helper for tools
# (src/tooling/include/ferry_tooling/...), or a system or third-party header. Nothing else under src/, and
# src/ stays off cli/CMakeLists.txt's include path. Reads the sources only; the ferry binary is not run.
# Usage: include_rule_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)

allowed() {  # allowed HEADER: may a file of cli/ include HEADER?
  local header=$1
  case "$header" in
    ../* | */../* | /*) return 1 ;;  # a way around the include path
    ferry/*) [ -f "$root/include/$header" ] ;;
    ferry_tooling/*) [ -f "$root/src/tooling/include/$header" ] ;;
    cli/support/*) [ -f "$root/$header" ] ;;
    ferry_bench/harness.hpp) return 0 ;;
    */*) [ ! -e "$root/src/$header" ] && [ ! -e "$root/src/tooling/include/$header" ] ;;
    *) [ -f "$root/cli/$header" ] || [ ! -e "$root/src/$header" ] ;;
  esac
}

checked=0
bad=0
for file in "$root"/cli/*.cpp "$root"/cli/*.hpp; do
  while IFS= read -r header; do
    checked=$((checked + 1))
    if ! allowed "$header"; then
      fail "${file#"$root"/} includes $header, which is not cli/, ferry/, ferry_bench/harness.hpp or ferry_tooling/"
      bad=$((bad + 1))
    fi
  done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]+)[">].*/\1/p' "$file")
done
[ "$checked" -gt 0 ] || fail "no #include found under cli/ (wrong source root $root?)"
[ "$bad" -eq 0 ] && pass "$checked #include lines in cli/ keep to the public API, the harness and ferry_tooling"

# The build enforces the rule only while no directory of src/ is on the CLI's include path: ferry_tooling's
# headers come with its target, so no command of cli/CMakeLists.txt needs to name src/.
if grep -vE '^[[:space:]]*#' "$root/cli/CMakeLists.txt" | grep -n '/src'; then
  fail "cli/CMakeLists.txt names a directory of src/ (the include path must come from ferry_tooling only)"
else
  pass "cli/CMakeLists.txt keeps src/ off the include path"
fi

rm -rf "$dir"
finish
