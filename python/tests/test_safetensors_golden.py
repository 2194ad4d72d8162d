"""Byte identity with the reference implementation: Ferry's files against golden files the reference wrote
(tests/fixtures/safetensors/golden, made by make_golden.py on a machine with the `safetensors` package), and,
where that package is installed here, against the package itself for the same cases and for random ones.

Skips, saying so, while the golden files are absent. Cases whose metadata has several keys compare up to
the order of those keys (the reference writes them in hash order; Ferry sorts them).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import ferry.safetensors as st

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "safetensors"
sys.path.insert(0, str(FIXTURES))
import golden_cases as gc  # noqa: E402

# FERRY_GOLDEN_DIR: golden files just written elsewhere (the GPU session checks them before they are committed).
GOLDEN = Path(os.environ.get("FERRY_GOLDEN_DIR", FIXTURES / "golden"))
MANIFEST = GOLDEN / "MANIFEST.json"


def _golden(name: str) -> bytes:
    if not MANIFEST.exists():
        pytest.skip(f"no golden files yet: run `python3 {FIXTURES / 'make_golden.py'}` on a machine with the "
                    "safetensors package (the GPU machine) and commit tests/fixtures/safetensors/golden")
    entry = json.loads(MANIFEST.read_text())["cases"].get(name)
    if entry is None:
        pytest.skip(f"{MANIFEST} has no case {name!r}: run make_golden.py again")
    if "skipped" in entry:
        pytest.skip(f"the golden file for {name!r} was not written: {entry['skipped']}")
    return (GOLDEN / f"{name}.safetensors").read_bytes()


def _same(ours: bytes, theirs: bytes, exact: bool) -> None:
    if exact:
        assert ours == theirs
        return
    ours_header, ours_data = gc.parse(ours)
    theirs_header, theirs_data = gc.parse(theirs)
    assert len(ours) == len(theirs)
    assert ours_header == theirs_header and list(ours_header) == list(theirs_header)
    assert ours_data == theirs_data


@pytest.mark.parametrize("name", sorted(gc.CASES))
def test_ferry_from_numpy_writes_the_golden_file(name, tmp_path):
    golden = _golden(name)
    arrays, raw = gc.numpy_arrays(name)
    st.save_file(arrays, tmp_path / "f.safetensors", gc.CASES[name].metadata, dtypes=raw)
    _same((tmp_path / "f.safetensors").read_bytes(), golden, gc.CASES[name].exact)


@pytest.mark.parametrize("name", sorted(gc.CASES))
def test_ferry_from_torch_writes_the_golden_file(name, tmp_path, torch):
    golden = _golden(name)
    try:
        tensors = gc.torch_tensors(name, torch)
    except KeyError as e:
        pytest.skip(f"this torch ({torch.__version__}) has no dtype for {e.args[0]}")
    st.save_file(tensors, tmp_path / "f.safetensors", gc.CASES[name].metadata)
    _same((tmp_path / "f.safetensors").read_bytes(), golden, gc.CASES[name].exact)


# ---- against the reference package itself, where it is installed


@pytest.fixture(scope="module")
def reference():
    return pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed here")


@pytest.mark.parametrize("name", sorted(n for n, c in gc.CASES.items() if c.writer == "numpy" and n != "metadata_only"))
def test_the_same_bytes_as_safetensors_numpy(name, tmp_path, reference):
    arrays, _ = gc.numpy_arrays(name)
    st.save_file(arrays, tmp_path / "f.safetensors", gc.CASES[name].metadata)
    _same((tmp_path / "f.safetensors").read_bytes(), reference.save(arrays, metadata=gc.CASES[name].metadata),
          gc.CASES[name].exact)


def test_the_same_bytes_as_safetensors_numpy_for_random_checkpoints(tmp_path, reference):
    rng = np.random.default_rng(22)
    dtypes = [d for d, (_, native) in gc.NUMPY_HOLDER.items() if native]
    alphabet = list("abAB._0123") + ["\u00e9", '"', "\\", "\n"]
    for round_ in range(200):
        arrays = {}
        for _ in range(int(rng.integers(0, 8))):
            name = "".join(rng.choice(alphabet, int(rng.integers(0, 6))))
            shape = tuple(int(d) for d in rng.integers(0, 4, int(rng.integers(0, 3))))
            holder = gc.NUMPY_HOLDER[str(rng.choice(dtypes))][0]
            count = int(np.prod(shape)) if shape else 1
            arrays[name] = rng.integers(0, 2, count).astype(holder).reshape(shape)
        metadata = {"k": str(round_)} if round_ % 2 else None
        path = tmp_path / f"r{round_}.safetensors"
        st.save_file(arrays, path, metadata, durable=False)
        assert path.read_bytes() == reference.save(arrays, metadata=metadata), (round_, list(arrays))


def test_the_same_bytes_as_safetensors_torch(tmp_path, torch):
    ref = pytest.importorskip("safetensors.torch", reason="the safetensors package is not installed here")
    for name, case in gc.CASES.items():
        if name == "metadata_only":
            continue
        try:
            tensors = gc.torch_tensors(name, torch)
        except KeyError:
            continue
        st.save_file(tensors, tmp_path / f"{name}.safetensors", case.metadata, durable=False)
        _same((tmp_path / f"{name}.safetensors").read_bytes(), ref.save(tensors, metadata=case.metadata), case.exact)


@pytest.mark.parametrize("name", sorted(gc.CASES))
def test_numpy_and_torch_inputs_make_the_same_file(name, tmp_path, torch):
    """Runs without the reference: the two front ends agree byte for byte."""
    try:
        tensors = gc.torch_tensors(name, torch)
    except KeyError as e:
        pytest.skip(f"this torch ({torch.__version__}) has no dtype for {e.args[0]}")
    arrays, raw = gc.numpy_arrays(name)
    st.save_file(arrays, tmp_path / "n.safetensors", gc.CASES[name].metadata, dtypes=raw, durable=False)
    st.save_file(tensors, tmp_path / "t.safetensors", gc.CASES[name].metadata, durable=False)
    assert (tmp_path / "n.safetensors").read_bytes() == (tmp_path / "t.safetensors").read_bytes()
    header, data = gc.parse((tmp_path / "n.safetensors").read_bytes())
    assert set(header) - {"__metadata__"} == {n for n, _, _ in gc.CASES[name].tensors}
