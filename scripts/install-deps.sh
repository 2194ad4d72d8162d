#!/usr/bin/env bash
# Installs the Debian packages Ferry builds and tests with, only those missing. Needs root (or sudo).
set -euo pipefail
# clang-14 and libclang-rt-14-dev (libFuzzer) build the safetensors header fuzzer that scripts/test.sh runs.
packages=(build-essential cmake ninja-build pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev python3-dev python3-numpy python3-pytest pybind11-dev
          clang-14 libclang-rt-14-dev
          libcurl4-openssl-dev libssl-dev nginx python3-dask python3-distributed liburing-dev python3-torch)
# liburing-dev: the io_uring engine of local files (io_engine=io_uring).
# python3-torch (CPU, 1.13): the PyTorch-level CPU tests of saving and of ferry.torch.load_into_module
# (python/tests/test_safetensors_save.py, test_torch_load_into_module.py); about 2 min 40 s to install on
# the 2-core CI machine.
# Remote objects (docs/remote.md): libcurl and libcrypto build src/remote; nginx serves the remote tests'
# files; dask and distributed run the ferry.dask tests on a local cluster. The S3 tests' server is an npm
# package (tests/remote/s3rver), installed below with the machine's Node.js (Debian's when there is none).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
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
s3dir="$(dirname "$0")/../tests/remote/s3rver"
if [ ! -d "$s3dir/node_modules/@20minutes/s3rver" ]; then
  echo "installing the S3 test server (npm ci in tests/remote/s3rver)" >&2
  (cd "$s3dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
