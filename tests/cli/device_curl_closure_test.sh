#!/usr/bin/env bash
# Regression (issue 49, 11): scripts/device-curl-closure.sh ended silently with nothing copied when `ldconfig -p`
# was long: under `set -o pipefail`, awk stopping at the first match killed ldconfig with SIGPIPE, and the
# failed assignment ended the script. Here a stand-in ldconfig prints libcurl's line first and then 4 MiB more,
# which a pipe cannot hold: the script must still copy libcurl's closure. Usage: device_curl_closure_test.sh
# FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

script=$(cd "$(dirname "$0")/../.." && pwd)/scripts/device-curl-closure.sh
curl_lib=$(/sbin/ldconfig -p 2>/dev/null | grep -m1 'libcurl\.so\.4 .*x86-64' | awk '{print $NF}')
if [ -z "$curl_lib" ]; then
  echo "SKIP: libcurl.so.4 is not installed here"
  exit 77
fi
mkdir -p "$dir/bin" "$dir/work"
cat >"$dir/bin/ldconfig" <<FAKE
#!/usr/bin/env bash
echo "	libcurl.so.4 (libc6,x86-64) => $curl_lib"
yes "	libfiller.so.1 (libc6,x86-64) => /nowhere/libfiller.so.1" | head -c 4194304
FAKE
chmod +x "$dir/bin/ldconfig"
if (cd "$dir/work" && PATH="$dir/bin:$PATH" bash "$script" >"$dir/out.log" 2>&1); then
  pass "the script ends well with a long ldconfig listing"
else
  fail "the script failed: $(tail -3 "$dir/out.log")"
fi
if [ -f "$dir/work/.device-deps/curl-closure/$(basename "$curl_lib")" ]; then
  pass "libcurl's closure was copied"
else
  fail "nothing was copied: $(ls "$dir/work/.device-deps/curl-closure" 2>&1 | head -3)"
fi
rm -rf "$dir"
finish
