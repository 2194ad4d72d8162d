#!/usr/bin/env bash
# Issue 48 (B11): after scripts/run.sh, which builds `ferry` alone, `cmake --install` failed on the ferry-bench
# that was not built, and `ferry --help` sent the user to it. This runs the build's own install script for cli/
# with ferry-bench's file missing: it must install ferry and nothing else, and succeed. Usage: install_test.sh
# FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

built=$(cd "$(dirname "$ferry")" && pwd)
script="$built/cmake_install.cmake"
if [ ! -f "$script" ] || ! command -v cmake >/dev/null 2>&1; then
  echo "SKIP: no cmake, or $ferry is not in a CMake build directory"
  exit 77
fi
# The same script, with ferry-bench's file somewhere it is not (as after `--target ferry_cli`).
sed "s|\"$built/ferry-bench\"|\"$dir/not-built/ferry-bench\"|g" "$script" >"$dir/cmake_install.cmake"
grep -q "$dir/not-built/ferry-bench" "$dir/cmake_install.cmake" || fail "the install script names no $built/ferry-bench"
if cmake -DCMAKE_INSTALL_PREFIX="$dir/prefix" -P "$dir/cmake_install.cmake" >"$dir/install.log" 2>&1; then
  pass "the CLI installs without ferry-bench built"
else
  fail "install without ferry-bench: $(tail -3 "$dir/install.log")"
fi
holds "ferry is installed" test -x "$dir/prefix/bin/ferry"
holds "no ferry-bench is installed" test ! -e "$dir/prefix/bin/ferry-bench"
# And with it built, it is installed beside ferry.
if [ -x "$bench" ] && cmake -DCMAKE_INSTALL_PREFIX="$dir/full" -P "$script" >"$dir/install-full.log" 2>&1; then
  holds "a built ferry-bench is installed beside ferry" test -x "$dir/full/bin/ferry-bench"
else
  skip "install with ferry-bench" "ferry-bench is not built here"
fi

# ferry --help names ferry-bench only as what it is: built by a full build, not by scripts/run.sh.
fold_output=1
expect "ferry --help says where ferry-bench comes from" 0 \
  'Benchmarks: ferry-bench, a program of its own, built beside ferry by a full build \(scripts/run.sh builds only ferry\)' -- --help

rm -rf "$dir"
finish
