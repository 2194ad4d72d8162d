#!/usr/bin/env python3
"""Writes the seed corpus of the safetensors header fuzzer (tests/fuzz/corpus/safetensors_header/).
Each seed starts with the mode byte the fuzzer reads: odd = a whole file, even = header JSON over
(byte / 2) bytes of data. Run from anywhere; the seeds are committed, so this only documents and
regenerates them."""
import json
import pathlib
import struct

here = pathlib.Path(__file__).resolve().parent / "corpus" / "safetensors_header"
here.mkdir(parents=True, exist_ok=True)
sizes = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
         "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8}


def header(tensors, metadata=None):
    h, offset = {}, 0
    if metadata is not None:
        h["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = sizes.get(dtype, 1)
        for d in shape:
            n *= d
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    return json.dumps(h).encode(), offset


def image(tensors, metadata=None, pad=8):
    text, data = header(tensors, metadata)
    text += b" " * (-(8 + len(text)) % pad)
    return b"\x01" + struct.pack("<Q", len(text)) + text + bytes(i % 251 for i in range(data))


def image_of(text):
    """A whole file around header text as given (no data)."""
    text += b" " * (-(8 + len(text)) % 8)
    return b"\x01" + struct.pack("<Q", len(text)) + text


def json_seed(tensors, metadata=None):
    text, data = header(tensors, metadata)
    assert data < 128
    return bytes([2 * data]) + text


seeds = {
    "empty-image": image([]),
    "empty-json": b"\x00{}",
    "metadata": image([("w", "F32", [2])], {"format": "pt", "note": "x"}),
    "every-dtype": image([(f"t.{d}", d, [2, 3]) for d in sizes]),
    "scalar-and-empty": image([("s", "F64", []), ("e", "BF16", [0, 4]), ("v", "U8", [3])]),
    "padded": image([("w", "I32", [5])], pad=64),
    "json-small": json_seed([("a", "U8", [3]), ("b", "F16", [2]), ("c", "BOOL", [])]),
    "json-metadata": json_seed([("a", "I64", [1])], {"k": "v"}),
    "json-overlap": b"\x10" + json.dumps({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                          "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}).encode(),
    "json-unknown-dtype": b"\x02" + json.dumps({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 1]}}).encode(),
    "length-past-end": b"\x01" + struct.pack("<Q", 1 << 40) + b"{}",
    # Issue 23: nesting 100,000 deep overflowed the stack (a recursive dump() in the message); NUL ended the
    # header early; "-0" was quoted as "0". The deep seed is 200 KB: scripts/fuzz-safetensors.sh's -max_len
    # admits it whole.
    "deep-nesting": b"\x00" + b'{"__metadata__":{"k":' + b"[" * 100000 + b"]" * 100000 + b"}}",
    "deep-nesting-image": image_of(b'{"w":' + b"[" * 1000 + b"]" * 1000 + b"}"),
    "nul-trailer": b"\x04" + json.dumps({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}).encode()
                   + b"\x00garbage",
    "negative-zero": b"\x00" + b'{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}}',
}
for name, data in seeds.items():
    (here / name).write_bytes(data)
print(f"{len(seeds)} seeds in {here}")
