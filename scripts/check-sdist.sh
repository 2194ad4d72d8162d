#!/usr/bin/env bash
# Checks the Python source distribution (ctest: package.sdist): builds it (scripts/make_sdist.py: with
# scikit-build-core where it is installed, else by the same file selection), unpacks it in SCRATCH_DIR, checks
# that it holds every tracked file the build reads, then configures the unpacked tree as scikit-build-core
# would (the pyproject's cmake.define), builds the extension, installs the `python` component and imports it
# to read a file. Exit 0 passed, 1 failed, 77 skipped (no pybind11 or no compiler; the reason is printed).
# Usage: scripts/check-sdist.sh [SCRATCH_DIR]   (default build/sdist-check)
# FERRY_SDIST_BUILD_TYPE (ctest passes the main build's) replaces the pyproject's build type. The unpacked
# tree is built in <tree>/build, as the checkout is in build/, so that with the same build type and
# CCACHE_BASEDIR covering both (scripts/build.sh sets it to the checkout) every compile is the main build's
# to the byte and ccache serves it: the check then costs a link, not a second compile of Ferry.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=${1:-$root/build/sdist-check}
rm -rf "$scratch" && mkdir -p "$scratch" && scratch=$(cd "$scratch" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
failures=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
finish() {
  echo "== $failures failure(s)"
  [ "$failures" -eq 0 ] && exit 0 || exit 1
}

# 1. The sdist, and what is in it.
if ! made=$("$py" "$root/scripts/make_sdist.py" "$scratch/dist" 2>"$scratch/sdist.err"); then
  fail "make_sdist.py: $(tail -5 "$scratch/sdist.err")"
  finish
fi
backend=${made%% *}
archive=${made#* }
pass "sdist built by $backend: $(basename "$archive") ($(stat -c %s "$archive") bytes)"
[ "$backend" = own ] && echo "NOTE scikit-build-core is not installed: the sdist was packed by make_sdist.py from the pyproject's sdist rules"
mkdir -p "$scratch/unpacked"
tar -xzf "$archive" -C "$scratch/unpacked" || { fail "could not unpack $archive"; finish; }
tree=$(find "$scratch/unpacked" -mindepth 1 -maxdepth 1 -type d | head -1)
for f in pyproject.toml PKG-INFO CMakeLists.txt cmake/install.cmake include/ferry/ferry.hpp src/build_config.hpp.in \
         python/CMakeLists.txt python/README.md python/ferry/__init__.py python/src/module.cpp; do
  [ -f "$tree/$f" ] && pass "sdist holds $f" || fail "sdist lacks $f"
done
# Every tracked file of the build's inputs, not only the few named above.
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  missing=$(cd "$root" && git ls-files CMakeLists.txt cmake include src python | while read -r f; do
    [ -f "$f" ] && [ ! -f "$tree/$f" ] && echo "$f"; done)
  [ -z "$missing" ] && pass "sdist holds every tracked file under CMakeLists.txt cmake/ include/ src/ python/" ||
    fail "sdist lacks tracked files: $(head -5 <<<"$missing" | tr '\n' ' ')"
fi
find "$tree" -maxdepth 1 -name 'build*' | grep -q . && fail "sdist holds a build directory" || pass "sdist holds no build directory"

# 2. Build the extension from the unpacked tree, with the defines scikit-build-core passes.
mapfile -t defines < <("$py" - "$tree/pyproject.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    sk = tomllib.load(f)["tool"]["scikit-build"]
for key, value in sk.get("cmake", {}).get("define", {}).items():
    print(f"-D{key}={value}")
print(f"-DCMAKE_BUILD_TYPE={sk.get('cmake', {}).get('build-type', 'Release')}")
PY
)
[ -n "${FERRY_SDIST_BUILD_TYPE:-}" ] && defines+=("-DCMAKE_BUILD_TYPE=$FERRY_SDIST_BUILD_TYPE")
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if ! cmake -S "$tree" -B "$tree/build" "${generator[@]}" "${defines[@]}" -DPython_EXECUTABLE="$py" \
     >"$scratch/configure.log" 2>&1; then
  if grep -q "needs pybind11" "$scratch/configure.log"; then
    echo "SKIP building the sdist: pybind11 is not installed (Debian: pybind11-dev)"
    exit 77
  fi
  fail "configure the unpacked sdist (${defines[*]}): $(tail -15 "$scratch/configure.log")"
  finish
fi
pass "configured the unpacked sdist (${defines[*]})"
start=$(date +%s)
if cmake --build "$tree/build" --target _ferry >"$scratch/build.log" 2>&1; then
  pass "built the extension _ferry from the unpacked sdist ($(($(date +%s) - start)) s)"
else
  fail "build _ferry from the sdist: $(tail -20 "$scratch/build.log")"
  finish
fi
if cmake --install "$tree/build" --component python --prefix "$scratch/install" >"$scratch/install.log" 2>&1; then
  pass "installed the python component"
else
  fail "install --component python: $(tail -10 "$scratch/install.log")"
  finish
fi
site=$(dirname "$(find "$scratch/install" -name __init__.py -path '*/ferry/*' | head -1)")
site=$(dirname "$site")
if out=$(cd "$scratch" && PYTHONPATH="$site" "$py" - "$scratch/data.bin" 2>&1 <<'PY'
import os, sys
import ferry
path = sys.argv[1]
data = os.urandom(1 << 20)
open(path, "wb").write(data)
got = bytearray(len(data))
with ferry.open(path) as f:
    n = f.read(got)
assert n == len(data) and bytes(got) == data, (n, len(data))
print(f"imported {ferry.__file__}, read {n} bytes, all match")
PY
); then
  pass "the installed package reads a file: $out"
else
  fail "the installed package: $out"
fi
finish
