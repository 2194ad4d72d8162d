"""What a user's path or URL becomes in Ferry's messages and files (issue 49, 5, 6 and 10), against a
checkpoint served on loopback under a URL that carries a planted password and signature.

Regressions, each failing on 189e30e:
* 5: ferry.torch.load_into_module's errors and its meta warning, ferry.distributed.load's errors on every
  rank, and save_file's error and ``filename`` showed ``user:PASSWORD@...?X-Amz-Signature=...``. Every label
  made from a caller's argument goes through one helper (``ferry._args.display``) now.
* 6: a NUL in a save path or shard prefix cut the path short: ``save_sharded(..., prefix="model\\0")`` wrote
  every shard and the index over one file ``model``, and reported three shards. It is refused.
* 10: ``save_file`` to a URL treated it as a local path; it says remote writes are not supported.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import ferry
import ferry.remote
from ferry import safetensors as fst

from distributed_ranks import run_ranks
from remote_servers import serve_directory

SECRETS = ("PASSWORD", "SIGNATURE")


def url_of(server, name: str) -> str:
    plain = server.url(name)
    return plain.replace("http://", "http://bob:PASSWORD@", 1) + "?X-Amz-Signature=SIGNATURE"


def assert_clean(*texts: object) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in str(text), text


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    if not ferry.remote.available():
        pytest.skip("Ferry was built without remote objects")
    base = tmp_path_factory.mktemp("served")
    root = base / "root"
    root.mkdir()
    fst.save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, root / "good.safetensors")
    (root / "bad.safetensors").write_bytes(b"\x10" + b"\x00" * 7 + b"{not json}\x00\x00\x00\x00\x00\x00")
    server = serve_directory(root, base / "nginx")
    yield server
    server.stop()


def test_load_into_module_messages_and_warnings_show_no_secret(served):
    torch = pytest.importorskip("torch", reason="ferry.torch needs PyTorch")
    import ferry.torch as ft

    url = url_of(served, "good.safetensors")

    class Wrong(torch.nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(2, n))

    with pytest.raises(ValueError) as mismatch:
        ft.load_into_module(Wrong(4), url)
    assert "'w' is F32 [2, 3] in the checkpoint" in str(mismatch.value)

    class Missing(Wrong):
        def __init__(self) -> None:
            super().__init__(3)
            self.v = torch.nn.Parameter(torch.zeros(1))

    with pytest.raises(RuntimeError) as missing:
        ft.load_into_module(Missing(), url)
    with ft.meta_parameters():
        model = Wrong(3)
    model.register_buffer("extra", torch.zeros(1, device="meta"), persistent=False)
    with pytest.raises(RuntimeError, match="on the meta device") as meta:
        ft.load_into_module(model, url, device="cpu")
    with ft.meta_parameters():
        model = Missing()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ft.load_into_module(model, url, device="cpu", strict=False)
    assert result.meta == ["v"] and caught
    assert_clean(mismatch.value, missing.value, meta.value, *(w.message for w in caught))
    assert "127.0.0.1" in str(missing.value)  # the display form still names the object


def test_distributed_errors_on_every_rank_show_no_secret(served, tmp_path):
    pytest.importorskip("torch", reason="ferry.distributed needs PyTorch")
    paths = [url_of(served, "good.safetensors"), url_of(served, "bad.safetensors")]
    records = run_ranks(tmp_path, 2, {"scenario": "load", "paths": paths, "load": {"timeout": 20}})
    assert not any(r["ok"] for r in records)
    for r in records:
        assert "DistributedLoadError" in r["error"] or "InvalidArgumentError" in r["error"], r
        assert_clean(r["error"], r.get("causes"))


def test_saves_to_a_url_are_refused_showing_no_secret(served, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = url_of(served, "new.safetensors")
    with pytest.raises(ferry.InvalidArgumentError, match="remote writes are not supported") as e:
        fst.save_file({"a": np.zeros(4, np.uint8)}, url)
    with pytest.raises(ferry.InvalidArgumentError, match="remote writes are not supported") as sharded:
        fst.save_sharded({"a": np.zeros(4, np.uint8)}, url)
    assert_clean(e.value, e.value.filename, sharded.value)
    assert os.listdir(tmp_path) == [], "a URL was taken for a local path"


def test_a_nul_in_a_save_path_or_prefix_is_refused_before_anything_is_written(tmp_path):
    a = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match="null"):
        fst.save_file({"a": a}, tmp_path / "p.safetensors\0.bak")
    with pytest.raises(ValueError, match="null"):
        fst.save_sharded({"a": a, "b": a + 1, "c": a + 2}, tmp_path / "shp", max_shard_size=16, prefix="model\0")
    with pytest.raises(ValueError, match="null"):
        fst.save_file({"a": a}, os.fsencode(tmp_path / "q.safetensors") + b"\0x")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
