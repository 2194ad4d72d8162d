#!/usr/bin/env bash
# Installs the Debian packages Ferry builds and tests with, only those missing. Needs root (or sudo).
set -euo pipefail
# clang-14 and libclang-rt-14-dev (libFuzzer) build the safetensors header fuzzer that scripts/test.sh runs.
packages=(build-essential cmake ninja-build pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev python3-dev python3-numpy python3-pytest pybind11-dev
          clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
