#!/usr/bin/env bash
# The CLI reaches the engine only through its public API (issue 14). Every #include in cli/ (and in the headers
# of cli/support, which cli/ includes) must be one of: a file of cli/ itself, a public header
# (include/ferry/...), the benchmark harness's interface (ferry_bench/harness.hpp), the programs' support
# library (cli/support/...), one of the few headers of src/ the library shares with its tools (listed below),
# or a system or third-party header. Nothing else under src/, and src/ stays off cli/CMakeLists.txt's include
# path (it comes with cli/support's target). Reads the sources only; the ferry binary is not run.
# Usage: include_rule_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)

# The headers of src/ that the library shares with its tools: what the library itself needs too, so it cannot
# live in cli/support. Each says at its top that the tools may include it.
shared_with_tools=" base/exit_status.hpp base/host_memory.hpp base/timing.hpp base/unique_fd.hpp
  file/output_file.hpp platform/cuda/device_memory.hpp "

allowed() {  # allowed HEADER: may a file of cli/ include HEADER?
  local header=$1
  case "$header" in
    ../* | */../* | /*) return 1 ;;  # a way around the include path
    ferry/*) [ -f "$root/include/$header" ] ;;
    cli/support/*) [ -f "$root/$header" ] ;;
    ferry_bench/harness.hpp) return 0 ;;
    *)
      if [[ "$shared_with_tools" == *" $header "* ]]; then
        [ -f "$root/src/$header" ]
      elif [[ "$header" == */* ]]; then
        [ ! -e "$root/src/$header" ] && [ ! -e "$root/$header" ]  # neither src/ nor a folder of the checkout
      else
        [ -f "$root/cli/$header" ] || [ ! -e "$root/src/$header" ]
      fi
      ;;
  esac
}

checked=0
bad=0
for file in "$root"/cli/*.cpp "$root"/cli/*.hpp "$root"/cli/support/*.hpp; do
  while IFS= read -r header; do
    checked=$((checked + 1))
    if ! allowed "$header"; then
      fail "${file#"$root"/} includes $header: not cli/, ferry/, ferry_bench/harness.hpp, nor shared with the tools"
      bad=$((bad + 1))
    fi
  done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]+)[">].*/\1/p' "$file")
done
[ "$checked" -gt 0 ] || fail "no #include found under cli/ (wrong source root $root?)"
[ "$bad" -eq 0 ] && pass "$checked #include lines in cli/ keep to the public API, the harness, cli/support and src/'s shared headers"

# src/ reaches the CLI's include path only through cli/support's target (cli/support/CMakeLists.txt), so no
# command of cli/CMakeLists.txt needs to name it.
if grep -vE '^[[:space:]]*#' "$root/cli/CMakeLists.txt" | grep -n '/src'; then
  fail "cli/CMakeLists.txt names a directory of src/ (the include path must come from cli/support only)"
else
  pass "cli/CMakeLists.txt keeps src/ off the include path"
fi

rm -rf "$dir"
finish
