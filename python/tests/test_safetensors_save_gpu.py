"""Saving from GPU memory (PyTorch CUDA tensors, CuPy arrays), loading whole models onto a GPU, and warming a
GPU up for a load (ferry.warm_up). Each test skips, saying why, without CUDA, PyTorch, CuPy, the safetensors
package or transformers.

Run on the GPU machine: PYTHONPATH=build/python python3 -m pytest python/tests/test_safetensors_save_gpu.py -v
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ferry
import ferry.safetensors as st


def _tensors(torch, device, scale=1):
    g = torch.Generator(device="cpu").manual_seed(22)
    out = {
        "embed.weight": torch.randn(512 * scale, 333, generator=g).to(torch.bfloat16),
        "norm.weight": torch.randn(333, generator=g),
        "ids": torch.arange(77, dtype=torch.int64),
        "flags": torch.rand(13, generator=g) > 0.5,
        "scalar": torch.tensor(3.25, dtype=torch.float64),
        "empty": torch.zeros(0, 8, dtype=torch.float16),
    }
    if hasattr(torch, "float8_e4m3fn"):
        out["f8"] = torch.randn(9, 9, generator=g).to(torch.float8_e4m3fn)
    return {k: v.to(device) for k, v in out.items()}


def test_cuda_tensors_make_the_same_file_as_cpu_tensors_through_pinned_staging(tmp_path, torch_cuda):
    torch = torch_cuda
    gpu = _tensors(torch, "cuda:0", scale=200)  # about 65 MiB: several staging windows
    result = st.save_file(gpu, tmp_path / "gpu.safetensors", {"format": "pt"})
    st.save_file({k: v.cpu() for k, v in gpu.items()}, tmp_path / "cpu.safetensors", {"format": "pt"})
    assert (tmp_path / "gpu.safetensors").read_bytes() == (tmp_path / "cpu.safetensors").read_bytes()
    data = sum(v.numel() * v.element_size() for v in gpu.values())
    assert result.stats["device_bytes"] == data and result.stats["staging_pinned"]
    assert any("pinned memory" in n for n in result.notes)
    back = st.load_file(tmp_path / "gpu.safetensors", device="cuda:0")
    for k, v in gpu.items():
        assert back[k].dtype == v.dtype and torch.equal(back[k].reshape(-1).view(torch.uint8), v.reshape(-1).view(torch.uint8)), k


def test_cuda_tensors_make_the_reference_file(tmp_path, torch_cuda):
    ref = pytest.importorskip("safetensors.torch", reason="the safetensors package is not installed")
    tensors = _tensors(torch_cuda, "cuda:0")
    st.save_file(tensors, tmp_path / "ferry.safetensors", {"format": "pt"})
    ref.save_file(tensors, str(tmp_path / "ref.safetensors"), metadata={"format": "pt"})
    assert (tmp_path / "ferry.safetensors").read_bytes() == (tmp_path / "ref.safetensors").read_bytes()


def test_cupy_arrays_make_the_same_file_as_numpy_arrays(tmp_path, cp):
    host = {"w": np.random.default_rng(0).standard_normal((300, 70)).astype(np.float32),
            "i": np.arange(9, dtype=np.int32), "raw_bf16": np.arange(10, dtype=np.uint16)}
    st.save_file({k: cp.asarray(v) for k, v in host.items()}, tmp_path / "cupy.safetensors",
                 dtypes={"raw_bf16": "BF16"})
    st.save_file(host, tmp_path / "numpy.safetensors", dtypes={"raw_bf16": "BF16"})
    assert (tmp_path / "cupy.safetensors").read_bytes() == (tmp_path / "numpy.safetensors").read_bytes()
    with pytest.raises(ValueError, match="'t' is not contiguous"):
        st.save_file({"t": cp.zeros((4, 4)).T}, tmp_path / "x.safetensors")


def test_work_queued_on_the_current_stream_is_waited_for(tmp_path, torch_cuda):
    torch = torch_cuda
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.zeros(64 << 20, dtype=torch.uint8, device="cuda")
        torch.cuda._sleep(50_000_000)  # keeps the stream busy before the fill
        x.fill_(7)
        st.save_file({"x": x}, tmp_path / "s.safetensors", durable=False)
    got = st.load_file(tmp_path / "s.safetensors", device="cpu")["x"]
    assert bool((got == 7).all())


@pytest.mark.watchdog(300)
def test_background_snapshot_then_the_tensors_may_change(tmp_path, torch_cuda):
    torch = torch_cuda
    tensors = _tensors(torch, "cuda:0", scale=400)
    want = {k: v.clone() for k, v in tensors.items()}
    handle = st.save_file(tensors, tmp_path / "bg.safetensors", background=True)
    handle.snapshot()
    for v in tensors.values():
        if v.numel():
            v.reshape(-1).view(torch.uint8).fill_(0xEE)  # training goes on (reshape: 0-dim tensors too)
    result = handle.result()
    back = st.load_file(tmp_path / "bg.safetensors", device="cuda:0")
    for k, v in want.items():
        assert torch.equal(back[k].reshape(-1).view(torch.uint8), v.reshape(-1).view(torch.uint8)), k
    assert result.stats["snapshot_wait_seconds"] == 0.0
    assert result.stats["snapshot_seconds"] < result.stats["seconds"]


@pytest.mark.watchdog(300)
def test_background_staging_smaller_than_the_checkpoint_waits_and_says_so(tmp_path, torch_cuda):
    torch = torch_cuda
    big = {"w": torch.ones(256 << 20, dtype=torch.uint8, device="cuda")}
    handle = st.save_file(big, tmp_path / "w.safetensors", background=True, max_staging_bytes="64MiB")
    result = handle.result()
    assert result.stats["staging_bytes"] == 64 << 20
    assert result.stats["snapshot_wait_seconds"] > 0
    assert any("the snapshot waited" in n for n in result.notes)


def test_tensors_on_two_gpus(tmp_path, torch_cuda):
    torch = torch_cuda
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    tensors = {"a": torch.arange(1000, device="cuda:0"), "b": torch.arange(2000, device="cuda:1").float()}
    st.save_file(tensors, tmp_path / "two.safetensors")
    st.save_file({k: v.cpu() for k, v in tensors.items()}, tmp_path / "cpu.safetensors")
    assert (tmp_path / "two.safetensors").read_bytes() == (tmp_path / "cpu.safetensors").read_bytes()


def test_load_into_module_on_the_gpu(tmp_path, torch_cuda):
    torch = torch_cuda
    import ferry.torch as ft

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.Linear(64, 64), torch.nn.LayerNorm(64)).cuda()
    st.save_sharded(model.state_dict(), tmp_path / "m", max_shard_size=10_000)
    with ft.meta_parameters(buffers_device="cuda:0"):
        fresh = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.Linear(64, 64), torch.nn.LayerNorm(64))
    result = ft.load_into_module(fresh, tmp_path / "m")
    assert result == ([], [])
    assert all(p.device == torch.device("cuda:0") for p in fresh.parameters())
    ids = torch.tensor([[1, 2, 3]], device="cuda")
    with torch.no_grad():
        assert torch.equal(fresh(ids), model(ids))


def test_a_transformers_model_from_config_loads_as_from_pretrained_does(tmp_path, torch_cuda):
    torch = torch_cuda
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    import ferry.torch as ft

    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    source = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    source.save_pretrained(tmp_path / "hf", safe_serialization=True, max_shard_size="200KB")
    reference = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "hf", torch_dtype=torch.bfloat16,
                                                              device_map="cuda:0")
    with ft.meta_parameters(buffers_device="cuda:0"):
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    missing, unexpected = ft.load_into_module(model, tmp_path / "hf")
    assert unexpected == []
    assert model.lm_head.weight is model.model.embed_tokens.weight
    ids = torch.tensor([[1, 17, 300, 5]], device="cuda:0")
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference(ids).logits)
    # Ferry's own sharded save reads back the same way.
    st.save_sharded(reference.state_dict(), tmp_path / "ferry", max_shard_size="200KB", metadata={"format": "pt"})
    for name in ("config.json", "generation_config.json"):  # a checkpoint folder: Ferry's weights, HF's configs
        if (tmp_path / "hf" / name).exists():
            shutil.copy(tmp_path / "hf" / name, tmp_path / "ferry" / name)
    again = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "ferry", torch_dtype=torch.bfloat16,
                                                          device_map="cuda:0")
    with torch.no_grad():
        assert torch.equal(again(ids).logits, reference(ids).logits)
    assert os.path.exists(tmp_path / "ferry" / "model.safetensors.index.json")


def test_warm_up_refuses_what_open_refuses():
    with pytest.raises(TypeError, match=r"ferry.warm_up\(\) got an unknown setting 'thread'"):
        ferry.warm_up(0, thread=4)
    with pytest.raises(ferry.InvalidArgumentError, match="device must not be negative, got -1"):
        ferry.warm_up(-1)


def test_warm_up_without_a_gpu_says_which_and_why():
    if ferry._ferry.cuda_driver_error() is None:
        pytest.skip("CUDA is usable here: test_a_read_after_meta_parameters_pins_nothing warms a GPU up")
    with pytest.raises(ferry.UnavailableError, match="cannot warm up GPU 0"):
        ferry.warm_up(0)


def test_a_read_after_meta_parameters_pins_nothing(tmp_path, torch_cuda):
    # A fresh process, as a training script starts: the model is built while ferry.warm_up pins on its own
    # thread, and the first read then has no pinning in its report.
    data = np.random.default_rng(5).integers(0, 256, 48 << 20, dtype=np.uint8)
    path = tmp_path / "data.bin"
    data.tofile(path)
    script = f"""
import threading, numpy as np, torch, ferry, ferry.torch as ft
torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
with ft.meta_parameters(buffers_device="cuda:0"):
    torch.nn.Linear(8, 8)
for t in threading.enumerate():
    if t.name == "ferry-warm-up":
        t.join(timeout=30)
buf = torch.full(({data.size} + 1,), 0xA5, dtype=torch.uint8, device="cuda:0")
with ferry.open({str(path)!r}) as f:
    f.pread(buf[:-1]).result()
    notes = f.report()["notes"]
want = np.fromfile({str(path)!r}, dtype=np.uint8)
got = buf.cpu().numpy()
assert (got[:-1] == want).all(), "wrong bytes"
assert got[-1] == 0xA5, "the byte after the destination was written"
assert not any("pinned bounce buffers" in n for n in notes), notes
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
