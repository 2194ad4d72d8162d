#!/usr/bin/env bash
# Run on the CPU machine, from the project root, after ../shared/device/fetch-deps.sh. Copies the shared
# libraries that this machine's libcurl needs (its whole closure, less the C library itself) into
# .device-deps/curl-closure/, so that a GPU machine without libcurl's dependencies can link and run Ferry's
# remote objects. scripts/gpu-session.sh adds only the ones that the GPU machine lacks to the library path,
# so none of its own libraries is shadowed.
set -euo pipefail
dest=.device-deps/curl-closure
rm -rf "$dest"; mkdir -p "$dest"
# awk reads the whole listing (no early exit): under pipefail, ldconfig killed by SIGPIPE would end the script.
curl_lib=$(ldconfig -p | awk '/libcurl\.so\.4 .*x86-64/ && !found {print $NF; found = 1}')
[ -n "$curl_lib" ] || { echo "libcurl.so.4 is not installed here (apt-get install libcurl4)" >&2; exit 1; }
ldd "$curl_lib" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|ld-linux*) continue ;;
  esac
  cp -L "$lib" "$dest/"
done
cp -L "$curl_lib" "$dest/"
ls "$dest" | wc -l | xargs echo "libraries in $dest:"
du -sh "$dest"
