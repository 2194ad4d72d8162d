#!/usr/bin/env bash
# Builds the safetensors header fuzzer with clang (libFuzzer + AddressSanitizer + UBSan) in its own build
# directory and runs it on the seed corpus, for a time or a number of executions.
#   scripts/fuzz-safetensors.sh                  # 30 seconds (what scripts/test.sh runs)
#   scripts/fuzz-safetensors.sh --seconds 600
#   scripts/fuzz-safetensors.sh --runs 1000000
# -max_len is 256 KiB, so that the 200 KB deep-nesting seed (issue 23) is fuzzed whole. New inputs go to
# $build/corpus (the committed seeds in tests/fuzz/corpus stay as they are); a crash leaves its input in
# $build/artifacts and fails the script. Exit 77 (skip) without clang++-14/libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time=30)
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    *) echo "usage: $0 [--seconds N | --runs N]" >&2; exit 2 ;;
  esac
done
cxx=${FERRY_FUZZ_CXX:-clang++-14}
build=${FERRY_FUZZ_BUILD_DIR:-build-fuzz}
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz-safetensors: skipped: $cxx not found (Debian: clang-14 libclang-rt-14-dev)" >&2
  exit 77
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
     "$cxx" -x c++ -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
  echo "fuzz-safetensors: skipped: $cxx cannot link libFuzzer (Debian: libclang-rt-14-dev)" >&2
  exit 77
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFERRY_BUILD_FUZZERS=ON -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_CLI=OFF -DFERRY_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build" --target safetensors_header_fuzzer -j "$(nproc)"
mkdir -p "$build/corpus" "$build/artifacts"
cp -n tests/fuzz/corpus/safetensors_header/* "$build/corpus/"
echo "fuzz-safetensors: $build/tests/fuzz/safetensors_header_fuzzer ${limit[*]} (commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
"$build/tests/fuzz/safetensors_header_fuzzer" "${limit[@]}" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
  -dict=tests/fuzz/safetensors_header.dict -artifact_prefix="$build/artifacts/" -print_final_stats=1 \
  "$build/corpus"
