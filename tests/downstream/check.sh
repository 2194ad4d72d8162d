#!/usr/bin/env bash
# The C++ package as a user meets it (ctest: package.downstream). Installs Ferry's build tree into a fresh
# prefix and builds tests/downstream/main.cpp against it three ways, running each program:
#   1. CMake: find_package(ferry CONFIG REQUIRED) and ferry::ferry (tests/downstream/CMakeLists.txt);
#   2. pkg-config: a plain `c++ main.cpp $(pkg-config --cflags --libs ferry)` command line;
#   3. add_subdirectory: a parent project builds Ferry from source (tests/downstream/parent), and its cache
#      must hold no build type forced by Ferry.
# Usage: check.sh FERRY_BUILD_DIR FERRY_SOURCE_DIR SCRATCH_DIR
set -u
build=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch" && scratch=$(cd "$scratch" && pwd)
here="$source_dir/tests/downstream"
prefix="$scratch/prefix"
failures=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -n "$compiler" ] || compiler=c++

# The install: only the `devel` component (headers, library, CMake and pkg-config files).
if cmake --install "$build" --prefix "$prefix" --component devel >"$scratch/install.log" 2>&1; then
  pass "cmake --install --component devel"
else
  fail "cmake --install: $(tail -5 "$scratch/install.log")"
fi
for f in include/ferry/ferry.hpp include/ferry/file.hpp include/ferry/status.hpp; do
  [ -f "$prefix/$f" ] && pass "installed $f" || fail "not installed: $f"
done
lib=$(find "$prefix" -name libferry.a | head -1)
config=$(find "$prefix" -name ferryConfig.cmake | head -1)
pc=$(find "$prefix" -name ferry.pc | head -1)
[ -n "$lib" ] && pass "installed ${lib#"$prefix"/}" || fail "libferry.a not installed"
[ -n "$config" ] && [ -f "$(dirname "$config")/ferryConfigVersion.cmake" ] && [ -f "$(dirname "$config")/ferryTargets.cmake" ] &&
  pass "installed ${config#"$prefix"/}, its version file and targets" || fail "ferryConfig.cmake, ferryConfigVersion.cmake or ferryTargets.cmake missing"
[ -n "$pc" ] && pass "installed ${pc#"$prefix"/}" || fail "ferry.pc not installed"
find "$prefix" -path '*/src/*' -o -name '*.cpp' | grep -q . && fail "private sources were installed" || pass "no private sources installed"

# 1. find_package(ferry CONFIG REQUIRED).
if cmake -S "$here" -B "$scratch/cmake" "${generator[@]}" -DCMAKE_CXX_COMPILER="$compiler" \
     -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$scratch/cmake.log" 2>&1 &&
   cmake --build "$scratch/cmake" >>"$scratch/cmake.log" 2>&1; then
  pass "find_package(ferry CONFIG REQUIRED): configured and built"
  if out=$("$scratch/cmake/downstream" "$scratch/cmake-data.bin" 2>&1); then pass "find_package build runs: $out"; else fail "find_package build: $out"; fi
else
  fail "find_package build: $(tail -15 "$scratch/cmake.log")"
fi
grep -q 'nlohmann' "$(dirname "$config")/ferryTargets.cmake" 2>/dev/null && fail "ferryTargets.cmake asks for nlohmann_json (used only inside)" ||
  pass "ferryTargets.cmake does not ask for nlohmann_json"

# 2. pkg-config, on a plain compiler command line.
if ! command -v pkg-config >/dev/null 2>&1; then
  echo "SKIP pkg-config build: pkg-config is not installed (Debian: pkg-config)"
else
  export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  if flags=$(pkg-config --cflags --libs ferry 2>"$scratch/pkg-config.err"); then
    pass "pkg-config --cflags --libs ferry: $flags"
    [ "$(pkg-config --modversion ferry)" = "$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")" ] &&
      pass "pkg-config --modversion is the project's version" || fail "pkg-config --modversion: $(pkg-config --modversion ferry)"
    # shellcheck disable=SC2086 # the flags are words
    if "$compiler" -std=c++20 -O1 "$here/main.cpp" -o "$scratch/pkg-downstream" $flags >"$scratch/pkg.log" 2>&1; then
      pass "pkg-config build"
      if out=$("$scratch/pkg-downstream" "$scratch/pkg-data.bin" 2>&1); then pass "pkg-config build runs: $out"; else fail "pkg-config build: $out"; fi
    else
      fail "pkg-config build: $(tail -15 "$scratch/pkg.log")"
    fi
  else
    fail "pkg-config --cflags --libs ferry: $(cat "$scratch/pkg-config.err")"
  fi
fi

# 3. add_subdirectory from a parent that sets no build type: Ferry must not write one into its cache.
if cmake -S "$here/parent" -B "$scratch/parent" "${generator[@]}" -DCMAKE_CXX_COMPILER="$compiler" \
     -DFERRY_SOURCE_DIR="$source_dir" >"$scratch/parent.log" 2>&1; then
  pass "add_subdirectory: configured (tests, CLI and install rules off by default)"
  type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$scratch/parent/CMakeCache.txt")
  [ -z "$type" ] && pass "add_subdirectory: the parent's cache has no build type from Ferry" ||
    fail "add_subdirectory: CMAKE_BUILD_TYPE=$type in the parent's cache"
  if [ "${FERRY_PACKAGE_TEST_BUILD_PARENT:-1}" = 0 ]; then
    echo "SKIP add_subdirectory build: FERRY_PACKAGE_TEST_BUILD_PARENT=0"
  elif cmake --build "$scratch/parent" --target downstream >>"$scratch/parent.log" 2>&1; then
    if out=$("$scratch/parent/downstream" "$scratch/parent-data.bin" 2>&1); then pass "add_subdirectory build runs: $out"; else fail "add_subdirectory build: $out"; fi
  else
    fail "add_subdirectory build: $(tail -15 "$scratch/parent.log")"
  fi
else
  fail "add_subdirectory configure: $(tail -15 "$scratch/parent.log")"
fi

echo "== $failures failure(s)"
[ "$failures" -eq 0 ]
