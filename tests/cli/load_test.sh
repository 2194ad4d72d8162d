#!/usr/bin/env bash
# `ferry load` as a shell user meets it: a checkpoint written by hand (the format is an 8-byte length,
# JSON, data), a sharded one, --json, --verify, a GPU where there is one, and the error cases with their exit
# statuses. Usage: load_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

# write_checkpoint PATH SPEC: SPEC is "name:DTYPE:dim,dim;..." (an empty shape is a 0-d tensor).
write_checkpoint() {
  "$py" - "$1" "$2" <<'PY'
import json, struct, sys
sizes = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
         "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8}
header, data = {"__metadata__": {"format": "pt"}}, b""
for item in sys.argv[2].split(";"):
    name, dtype, dims = item.split(":")
    shape = [int(d) for d in dims.split(",") if d]
    n = sizes.get(dtype, 1)
    for d in shape:
        n *= d
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
    data += bytes((len(data) + i) * 7 % 251 for i in range(n))
text = json.dumps(header).encode()
text += b" " * (-(8 + len(text)) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(text)) + text + data)
PY
}

ckpt="$dir/model.safetensors"
write_checkpoint "$ckpt" "embed.weight:BF16:300,64;layer.0.w:F32:64,64;flags:BOOL:5;scale:F64:;empty:F16:0,3"
fold_output=1
expect "load into host memory" 0 "loaded 5 tensors, .* into host memory .* layer.0.w F32 \[64, 64\] host .* all host" -- load "$ckpt"
expect "load lists metadata" 0 "metadata: format=pt" -- load "$ckpt"
expect "load --verify" 0 "verify: OK, 5 tensor copies" -- load "$ckpt" --verify --max-request 4KiB
out=$("$ferry" load "$ckpt" --json)
if "$py" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["schema"]=="ferry.load/1" and d["target"]=="host" and [t["name"] for t in d["tensors"]]==["embed.weight","layer.0.w","flags","scale","empty"] and d["tensors"][3]["shape"]==[] and d["tensors"][0]["dtype"]=="BF16" and d["report"]["total_bytes"]==d["bytes"], d' "$out"; then
  pass "load --json"
else
  fail "load --json: ${out:0:600}"
fi

# Sharded: two shards and their index, loaded by naming the directory.
mkdir -p "$dir/sharded"
write_checkpoint "$dir/sharded/model-00001-of-00002.safetensors" "a.w:F32:10,10;a.b:F32:10"
write_checkpoint "$dir/sharded/model-00002-of-00002.safetensors" "b.w:F16:7,7"
"$py" -c 'import json,sys; json.dump({"metadata": {}, "weight_map": {"a.w": "model-00001-of-00002.safetensors", "a.b": "model-00001-of-00002.safetensors", "b.w": "model-00002-of-00002.safetensors"}}, open(sys.argv[1], "w"))' "$dir/sharded/model.safetensors.index.json"
expect "sharded checkpoint" 0 "loaded 3 tensors, .* from 2 files .* verify: OK" -- load "$dir/sharded" --verify

# A GPU where there is one; otherwise a clear failure.
out=$("$ferry" load "$ckpt" --device 0 --verify 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q "into GPU 0" <<<"$out" && grep -q "verify: OK" <<<"$out"; then
  pass "load --device 0 (GPU)"
elif [ $rc -eq 1 ] && grep -qE "CUDA is not usable here|cuInit failed|no CUDA" <<<"$out"; then
  pass "load --device 0 without a GPU fails clearly"
else
  fail "load --device 0: exit $rc: ${out:0:600}"
fi

# Errors.
write_checkpoint "$dir/bad-dtype.safetensors" "w:F33:2"
expect "unknown dtype" 1 "invalid_argument: Invalid safetensors header in \".*bad-dtype.safetensors\": tensor \"w\": unknown dtype \"F33\"" -- load "$dir/bad-dtype.safetensors"
head -c 100 "$ckpt" > "$dir/truncated.safetensors"
expect "truncated file" 1 "Invalid safetensors header in \".*truncated.safetensors\": the header length .* points past the end" -- load "$dir/truncated.safetensors"
head -c -5 "$ckpt" > "$dir/short-data.safetensors"
expect "truncated data" 1 "tensor \"(empty|scale)\": data_offsets .* reach past the end of the data section" -- load "$dir/short-data.safetensors"
printf 'not a checkpoint' > "$dir/text.safetensors"
expect "not a checkpoint" 1 "Invalid safetensors header in \".*text.safetensors\"" -- load "$dir/text.safetensors"
# Issue 48: a file that cannot be a checkpoint says so first, in words (not a C++ option's name), and keeps
# the parser's detail after it; one that could be a truncated checkpoint is left to the parser's words.
head -c 4096 /dev/urandom > "$dir/random.bin"
printf '\x01\x00\x00\x00\x00\x00\x00\x00' | dd of="$dir/random.bin" bs=1 seek=7 count=1 conv=notrunc status=none
expect "random data: not a safetensors file" 1 \
  "^ferry: invalid_argument: not a safetensors file: Invalid safetensors header in \".*random.bin\": the header length" \
  -- load "$dir/random.bin"
printf 'abc' > "$dir/three.bin"
expect "3 bytes: not a safetensors file" 1 "not a safetensors file: .*too short" -- load "$dir/three.bin"
printf '\x08\x00\x00\x00\x00\x00\x00\x00[1]     ' > "$dir/array.safetensors"
expect "a header that is no JSON object: not a safetensors file" 1 "not a safetensors file: " -- load "$dir/array.safetensors"
out=$("$ferry" load "$dir/truncated.safetensors" 2>&1)
grep -q "not a safetensors file: " <<<"$out" && fail "truncated: said not a safetensors file: $out" ||
  pass "truncated: left to the parser's words"
out=$("$ferry" load "$dir/random.bin" --json 2>/dev/null)
"$py" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["code"]=="invalid_argument" and d["message"].startswith("invalid_argument: not a safetensors file: "), d' "$out" \
  && pass "random data: the error object says it too" || fail "random data --json: ${out:0:300}"
expect "missing file" 1 "not_found: Could not open \".*nope.safetensors\"" -- load "$dir/nope.safetensors"
expect "bad replicas" 2 "--replicas takes GPU ordinals" -- load "$ckpt" --replicas x
expect "replicas into host memory are a usage error" 2 "--replicas needs --device N" -- load "$ckpt" --replicas 1
expect "bad request size" 2 "--max-request" -- load "$ckpt" --max-request 4XB
expect "empty request size is not \"not given\"" 2 "--max-request.*empty value" -- load "$ckpt" --max-request ''
expect "empty replicas" 2 "--replicas.*empty value" -- load "$ckpt" --replicas ''

# Issue 23: hostile headers fail cleanly (a header nested 100,000 deep crashed the process, exit 139;
# bytes after a NUL were ignored).
"$py" - "$dir/deep.safetensors" "$dir/nul.safetensors" <<'PY'
import struct, sys
deep = b'{"__metadata__":{"k":' + b"[" * 100000 + b"]" * 100000 + b"}}"
nul = b'{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}\0garbage'
for path, text, data in ((sys.argv[1], deep, b""), (sys.argv[2], nul, b"ab")):
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)
PY
expect "deeply nested header" 1 "deep.safetensors\": arrays and objects are nested more than 16 deep" -- load "$dir/deep.safetensors"
expect "NUL in a header" 1 "nul.safetensors\": byte 53 is NUL" -- load "$dir/nul.safetensors"

# Issue 23: --verify of 5,000 tiny tensors took 33 s (0.2 s without): each tensor's comparison allocated
# 16 MiB buffers for each of 4 threads. The bound is generous; the old way is far past it.
many=$("$py" -c 'print(";".join(f"t{i}:U8:3" for i in range(5000)))')
write_checkpoint "$dir/many.safetensors" "$many"
start=$EPOCHREALTIME
expect "--verify of 5,000 tensors" 0 "verify: OK, 5000 tensor copies" -- load "$dir/many.safetensors" --verify
seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
if awk -v s="$seconds" 'BEGIN { exit !(s < 8) }'; then
  pass "--verify of 5,000 tensors in $seconds s"
else
  fail "--verify of 5,000 tensors took $seconds s"
fi
expect "no checkpoint" 2 "CHECKPOINT is required" -- load
# Counts of one are singular (issue 48).
write_checkpoint "$dir/one.safetensors" "w:U8:4"
expect "one tensor, one file, one request" 0 "loaded 1 tensor, 4 B from 1 file of .* \(1 request\)" -- load "$dir/one.safetensors"
expect "one tensor copy verified" 0 "verify: OK, 1 tensor copy, 4 B match" -- load "$dir/one.safetensors" --verify
finish
