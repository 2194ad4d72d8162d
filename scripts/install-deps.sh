#!/usr/bin/env bash
# Installs the Debian packages Ferry needs, only those missing. Needs root (or sudo).
# Usage: scripts/install-deps.sh run    what scripts/run.sh needs: the library and the `ferry` command
#        scripts/install-deps.sh [test] that, and what scripts/build.sh (tests, Python module) and
#                                        scripts/test.sh (every test, the fuzzer) need
set -euo pipefail
set_name=${1:-test}
# The library and the CLI: the compiler and build tools, fmt, CLI11, nlohmann-json; libcurl and libcrypto
# build remote objects (src/remote, docs/remote.md; without them ferry::remote says it is unavailable), and
# liburing the io_uring engine of local files (io_engine=io_uring).
run_packages=(build-essential cmake ninja-build pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev
              libcurl4-openssl-dev libssl-dev liburing-dev)
# The tests and the Python module: ccache (scripts/compiler-cache.sh: the packaging checks compile Ferry again
# from other folders); gtest, pybind11 and NumPy; mypy checks the package's types (python.mypy);
# clang-14 and libclang-rt-14-dev (libFuzzer) build the safetensors header fuzzer that scripts/test.sh runs; nginx serves the remote tests' files; dask and
# distributed run the ferry.dask tests on a local cluster; python3-torch (CPU, 1.13) the PyTorch-level CPU
# tests of saving and of ferry.torch.load_into_module (about 2 min 40 s to install on the 2-core CI machine).
# The S3 tests' server is an npm package (tests/remote/s3rver), installed below with the machine's Node.js
# (Debian's when there is none).
test_packages=(ccache libgtest-dev libgmock-dev python3-dev python3-numpy python3-pytest pybind11-dev mypy
               clang-14 libclang-rt-14-dev nginx python3-dask python3-distributed python3-torch)
case "$set_name" in
  run) packages=("${run_packages[@]}") ;;
  test)
    packages=("${run_packages[@]}" "${test_packages[@]}")
    command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
    ;;
  *) echo "usage: $0 run|test" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$set_name" = test ]; then
  s3dir="$(dirname "$0")/../tests/remote/s3rver"
  if [ ! -d "$s3dir/node_modules/@20minutes/s3rver" ]; then
    echo "installing the S3 test server (npm ci in tests/remote/s3rver)" >&2
    (cd "$s3dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
fi
