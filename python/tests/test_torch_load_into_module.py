"""ferry.torch.load_into_module with a small PyTorch model on the CPU: meta-device modules (parameters assigned,
buffers left real), modules already in memory (filled in place), tied weights, checkpoints as a file, an
index or a directory, strict and non-strict key reports, and dtype or shape mismatches refused before any
read."""

from __future__ import annotations

import threading
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import ferry.safetensors as st  # noqa: E402
import ferry.torch as ft  # noqa: E402


class Tiny(torch.nn.Module):
    """Embedding tied to the output head, a norm with a persistent buffer, and a computed, non-persistent
    buffer (as rotary embeddings' inv_freq) that no checkpoint holds."""

    def __init__(self, vocab: int = 50, dim: int = 16, dtype=torch.float32) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim, dtype=dtype)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(dim, dim, dtype=dtype) for _ in range(3))
        self.norm = torch.nn.LayerNorm(dim, dtype=dtype)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)),
                             persistent=False)
        self.head = torch.nn.Linear(dim, vocab, bias=False, dtype=dtype)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = torch.relu(layer(x)) + x * self.inv_freq.repeat(2)[: x.shape[-1]].to(x.dtype)
        return self.head(self.norm(x))


IDS = torch.tensor([[1, 5, 7, 3]])


@pytest.fixture
def saved(tmp_path):
    """A trained-looking model, saved sharded (tied weights once), and its logits."""
    torch.manual_seed(0)
    model = Tiny()
    model.steps += 7
    result = st.save_sharded(model.state_dict(), tmp_path / "ckpt", max_shard_size=2000)
    assert result.aliases == {"head.weight": "embed.weight"} and result.index is not None
    with torch.no_grad():
        return tmp_path / "ckpt", model, model(IDS)


def test_a_meta_module_gets_the_checkpoint_without_copies_and_runs(saved):
    ckpt, model, logits = saved
    with ft.meta_parameters(buffers_device="cpu"):
        fresh = Tiny()
    assert all(p.device.type == "meta" for p in fresh.parameters())
    assert fresh.inv_freq.device.type == "cpu", "buffers built real"
    result = ft.load_into_module(fresh, ckpt, device="cpu")
    missing, unexpected = result
    assert missing == [] and unexpected == [] and result.meta == []
    assert result.tied == [["embed.weight", "head.weight"]]
    assert fresh.head.weight is fresh.embed.weight, "tied weights stay tied"
    assert isinstance(fresh.embed.weight, torch.nn.Parameter) and fresh.embed.weight.requires_grad
    assert int(fresh.steps) == 7
    with torch.no_grad():
        assert torch.equal(fresh(IDS), logits)
    # Views of the loaded buffer: no extra copy was made.
    storages = {p.untyped_storage().data_ptr() if hasattr(p, "untyped_storage") else p.storage().data_ptr()
                for p in fresh.parameters()}
    assert len(storages) == 1
    assert result.stats["bytes_read"] > 0


def test_a_module_in_memory_is_filled_in_place(saved):
    ckpt, model, logits = saved
    torch.manual_seed(1)
    fresh = Tiny()
    before = {n: p.data_ptr() for n, p in fresh.named_parameters()}
    missing, unexpected = ft.load_into_module(fresh, ckpt)
    assert (missing, unexpected) == ([], [])
    assert {n: p.data_ptr() for n, p in fresh.named_parameters()} == before
    with torch.no_grad():
        assert torch.equal(fresh(IDS), logits)


@pytest.mark.parametrize("which", ["file", "index", "directory"])
def test_a_file_an_index_or_a_directory(tmp_path, saved, which):
    ckpt, model, logits = saved
    if which == "file":
        target = tmp_path / "one.safetensors"
        state = {k: v for k, v in model.state_dict().items() if k != "head.weight"}
        st.save_file(state, target)
    else:
        target = ckpt / "model.safetensors.index.json" if which == "index" else ckpt
    with ft.meta_parameters(buffers_device="cpu"):
        fresh = Tiny()
    ft.load_into_module(fresh, target)
    with torch.no_grad():
        assert torch.equal(fresh(IDS), logits)


def test_strict_reports_keys_as_load_state_dict_before_reading(tmp_path, saved):
    ckpt, model, _ = saved
    state = dict(model.state_dict())
    del state["head.weight"]
    state.pop("norm.bias")
    state["extra.weight"] = torch.zeros(2)
    st.save_file(state, tmp_path / "odd.safetensors")
    with ft.meta_parameters(buffers_device="cpu"):
        fresh = Tiny()
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "norm.bias"\. .*\n\tUnexpected key\(s\) '
                                           r'in state_dict: "extra.weight"') as e:
        ft.load_into_module(fresh, tmp_path / "odd.safetensors")
    assert "nothing was read" in str(e.value)
    assert all(p.device.type == "meta" for p in fresh.parameters())
    with pytest.warns(UserWarning, match="still on the meta device.*norm.bias"):
        result = ft.load_into_module(fresh, tmp_path / "odd.safetensors", strict=False)
    assert result.missing_keys == ["norm.bias"] and result.unexpected_keys == ["extra.weight"]
    assert result.meta == ["norm.bias"]
    expected = Tiny().load_state_dict(state, strict=False)
    assert sorted(result.unexpected_keys) == sorted(expected.unexpected_keys)


def built_on_meta() -> Tiny:
    """Tiny as `with torch.device("meta")` builds it (torch >= 2.0), or the same by hand on torch 1.13."""
    if hasattr(torch.device("meta"), "__enter__"):
        with torch.device("meta"):
            return Tiny()
    with ft.meta_parameters():
        model = Tiny()
    for name in [n for n, _ in model.named_buffers()]:
        model._buffers[name] = model._buffers[name].to("meta")
    return model


def test_strict_refuses_a_module_that_would_keep_meta_tensors_before_reading(saved, monkeypatch):
    # Built as under torch.device("meta"): the computed, non-persistent buffer is on meta too, and no
    # checkpoint holds it, so the module could not run after the load.
    ckpt, _, logits = saved
    fresh = built_on_meta()
    loads = []
    real_load = st.load
    monkeypatch.setattr(st, "load", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    with pytest.raises(RuntimeError, match=r"nothing was read\): 1 tensor\(s\) are on the meta device and not in the "
                                           r"checkpoint.*: inv_freq\. .*ferry\.torch\.meta_parameters") as e:
        ft.load_into_module(fresh, ckpt, device="cpu")
    assert "strict=False" in str(e.value)
    assert loads == [], "something was read before the refusal"
    assert all(p.device.type == "meta" for p in fresh.parameters())
    # strict=False: loaded, with the warning and the names, as before.
    with pytest.warns(UserWarning, match="1 tensor\\(s\\) are still on the meta device.*inv_freq") as caught:
        result = ft.load_into_module(fresh, ckpt, device="cpu", strict=False)
    assert len(caught) == 1
    assert result.meta == ["inv_freq"] and loads
    assert all(p.device.type == "cpu" for p in fresh.parameters())
    # Built the documented way, the same module loads under strict=True without a warning, and runs.
    with ft.meta_parameters(buffers_device="cpu"):
        ready = Tiny()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = ft.load_into_module(ready, ckpt, device="cpu")
    assert result.meta == []
    with torch.no_grad():
        assert torch.equal(ready(IDS), logits)


def test_dtype_and_shape_mismatches_are_refused_before_any_read(saved):
    ckpt, _, _ = saved
    with ft.meta_parameters(buffers_device="cpu"):
        half = Tiny(dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"'embed.weight' is F32 \[50, 16\] in the checkpoint, but BF16"):
        ft.load_into_module(half, ckpt)
    with ft.meta_parameters(buffers_device="cpu"):
        wide = Tiny(dim=32)
    with pytest.raises(ValueError, match=r"nothing was read.*'layers.0.weight' is F32 \[16, 16\].*\[32, 32\]"):
        ft.load_into_module(wide, ckpt)
    assert all(p.device.type == "meta" for p in wide.parameters())
    with pytest.raises(TypeError, match="torch.nn.Module"):
        ft.load_into_module({"a": 1}, ckpt)


def test_meta_parameters_restores_torch(tmp_path):
    register = torch.nn.Module.register_parameter
    with pytest.raises(ZeroDivisionError):
        with ft.meta_parameters():
            1 / 0
    assert torch.nn.Module.register_parameter is register
    assert Tiny().embed.weight.device.type == "cpu"


def test_meta_parameters_warms_up_the_gpu_its_buffers_go_to(monkeypatch):
    # ferry.warm_up is replaced: this machine may have no GPU; the GPU tests run the real one.
    calls = []
    monkeypatch.setattr(ft._ferry, "warm_up", lambda device, config: calls.append((device, config)))
    with ft.meta_parameters(buffers_device="cuda:3"):
        layer = torch.nn.Linear(4, 4)  # no buffers: nothing is moved to a GPU this machine may not have
    for thread in threading.enumerate():
        if thread.name == "ferry-warm-up":
            thread.join(timeout=30)
    assert calls == [(3, None)]
    assert layer.weight.device.type == "meta"
    calls.clear()
    # "cuda" alone is the caller's current device, asked on the caller's thread (each thread has its own).
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    with ft.meta_parameters(buffers_device="cuda"):
        torch.nn.Linear(4, 4)
    for thread in threading.enumerate():
        if thread.name == "ferry-warm-up":
            thread.join(timeout=30)
    assert calls == [(2, None)]
    calls.clear()
    with ft.meta_parameters(buffers_device="cpu"):
        torch.nn.Linear(4, 4)
    with ft.meta_parameters():
        torch.nn.Linear(4, 4)
    assert calls == [], "a warm-up without a GPU to build on"
