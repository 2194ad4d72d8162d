"""Issue 23, the Python items about checkpoints: file names that are not UTF-8 (str with surrogate escapes,
or bytes) open, load and come back as os.fsdecode gives them, also in notes and exceptions; a shape the
format allows but NumPy cannot make is refused naming the file and the tensor; a deeply nested header is
refused instead of crashing the interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ferry
from ferry import safetensors as fst
from test_safetensors import raw_file, sample, write_checkpoint

BAD = os.fsdecode(b"bad-\xff\xfe-caf\xc3\xa9")  # str with surrogate escapes for the bytes that are not UTF-8


def tensors():
    return {"w": ("F32", sample("F32", (4, 3), 1)), "b": ("U8", sample("U8", (5,), 2))}


def test_a_name_that_is_not_utf8_loads_as_str_and_as_bytes(tmp_path: Path) -> None:
    path = write_checkpoint(tmp_path / (BAD + ".safetensors"), tensors())
    for name in (str(path), os.fsencode(path), path):
        result = fst.load(name, "cpu", framework="numpy")
        assert np.array_equal(result.tensors["w"], tensors()["w"][1])
        assert result.stats["files"] == [str(path)]
        assert os.fsencode(result.stats["files"][0]) == os.fsencode(path)
    with fst.safe_open(os.fsencode(path), framework="numpy") as f:
        assert f.files() == [str(path)]
        assert np.array_equal(f.get_tensor("b"), tensors()["b"][1])
        assert np.array_equal(f.get_slice("w")[1:3], tensors()["w"][1][1:3])
        assert repr(str(path)) in repr(f)
    assert np.array_equal(fst.load_file(path, "cpu", framework="numpy")["b"], tensors()["b"][1])
    target = np.zeros((4, 3), np.float32)
    fst.load_into(path, {"w": target})
    assert np.array_equal(target, tensors()["w"][1])


def test_a_badly_named_file_inside_a_cleanly_named_directory(tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    clean.mkdir()
    path = write_checkpoint(clean / (BAD + ".safetensors"), tensors())
    result = fst.load(str(clean), "cpu", framework="numpy")
    assert result.stats["files"] == [str(path)]


def test_notes_and_errors_quote_such_names(tmp_path: Path) -> None:
    # A sharded checkpoint in a badly named directory, with a tensor its weight map leaves out: the note names
    # the index (and so the directory); before, reading the notes raised UnicodeDecodeError.
    shard_dir = tmp_path / BAD
    shard_dir.mkdir()
    write_checkpoint(shard_dir / "model-00001-of-00001.safetensors", tensors())
    (shard_dir / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": "model-00001-of-00001.safetensors"}}))
    result = fst.load(str(shard_dir), "cpu", framework="numpy")
    assert sorted(result.tensors) == ["b", "w"]
    assert any("not in the weight map" in n for n in result.stats["notes"])
    assert all(isinstance(n, str) for n in result.stats["notes"])
    missing = tmp_path / (BAD + "-missing.safetensors")
    with pytest.raises(FileNotFoundError) as e:
        fst.load(str(missing), "cpu", framework="numpy")
    assert e.value.filename == str(missing)
    bad = raw_file(tmp_path / (BAD + "-broken.safetensors"), b'{"w": 1}')
    with pytest.raises(ferry.InvalidArgumentError) as e:
        fst.load(os.fsencode(bad), "cpu", framework="numpy")
    assert e.value.filename == str(bad)
    with pytest.raises(ValueError, match="embedded null byte"):
        fst.load(str(tmp_path / "a\0b"), "cpu", framework="numpy")


def test_a_shape_numpy_cannot_make_names_the_file_and_the_tensor(tmp_path: Path) -> None:
    # 65 dimensions of 1: valid safetensors, more than NumPy allows (32 before NumPy 2, 64 since).
    header = {"ok": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
              "deep": {"dtype": "U8", "shape": [1] * 65, "data_offsets": [2, 3]}}
    path = raw_file(tmp_path / "odd.safetensors", header, b"\x01\x02\x03")
    for call in (lambda: fst.load(path, "cpu", framework="numpy"),
                 lambda: fst.safe_open(path, framework="numpy").get_tensor("deep")):
        with pytest.raises(ferry.InvalidArgumentError) as e:
            call()
        text = str(e.value)
        assert "tensor 'deep'" in text and str(path) in text and "numpy" in text, text
        assert e.value.filename == str(path)
        assert isinstance(e.value.__cause__, ValueError)
    assert fst.safe_open(path, framework="numpy").get_tensor("ok").tolist() == [1, 2]


def test_deep_nesting_is_refused_without_crashing_the_interpreter(tmp_path: Path) -> None:
    deep = "[" * 100000 + "]" * 100000
    path = raw_file(tmp_path / "deep.safetensors", '{"__metadata__":{"k":' + deep + "}}")
    index = tmp_path / "deep" / "model.safetensors.index.json"
    index.parent.mkdir()
    index.write_text('{"weight_map":{"w":' + deep + "}}")
    # In a child process: before, this was a segfault (exit 139) that would take the test run with it.
    code = ("import sys, ferry.safetensors as fst\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n"
            "        fst.load(p, 'cpu', framework='numpy')\n"
            "    except ValueError as e:\n"
            "        print(e)\n")
    child = subprocess.run([sys.executable, "-c", code, str(path), str(index)], capture_output=True, text=True,
                           env=dict(os.environ), timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout.count("nested more than 16 deep") == 2, child.stdout
