"""Every tensor a Ferry loader allocates starts where the framework's own allocator would put it (issue 47):
256-byte aligned in GPU memory (cudaMalloc's guarantee; PyTorch's caching allocator gives 512), 64 in host
memory, with less than one alignment of padding per tensor. Before, tensors were views at their file
offsets (8-byte aligned), and a model loaded so computed other logits, 1.53x slower.

Checked for every loader that allocates: load_file, load, safe_open (get_tensor, get_slice, load), device
maps, ferry.torch.load_into_module and ferry.distributed.load (a group of one and of two); PyTorch and
NumPy in host memory here, PyTorch and CuPy on the GPU where there is one. Checkpoints with odd sizes put
most tensors at unaligned file offsets."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

from ferry import safetensors as fst

HOST_ALIGNMENT = 64
DEVICE_ALIGNMENT = 256


def odd_tensors() -> Dict[str, np.ndarray]:
    """Sizes that leave later tensors at unaligned file offsets, an empty and a 0-d tensor among them."""
    rng = np.random.default_rng(47)
    shapes = [((3,), np.uint8), ((17, 9), np.float32), ((), np.float64), ((0, 4), np.float16), ((5, 5), np.int8),
              ((1000,), np.float16), ((7,), np.int64), ((33, 65), np.int16), ((1,), np.int32)]
    return {f"t{i}": (rng.standard_normal(shape) * 100).astype(dtype) for i, (shape, dtype) in enumerate(shapes)}


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "odd.safetensors"
    fst.save_file(odd_tensors(), path)
    return path


def address(t: Any) -> int:
    if hasattr(t, "data_ptr"):
        return int(t.data_ptr())
    if hasattr(t, "ctypes"):
        return int(t.ctypes.data)
    return int(t.data.ptr)  # CuPy


def check_placed(tensors: Dict[str, Any], alignment: int) -> None:
    want = odd_tensors()
    assert sorted(tensors) == sorted(want)
    for name, t in tensors.items():
        if t.size:
            assert address(t) % alignment == 0, f"{name} at {address(t):#x} is not {alignment}-byte aligned"
        got = t.cpu().numpy() if hasattr(t, "cpu") else (t.get() if hasattr(t, "get") else t)
        np.testing.assert_array_equal(np.asarray(got), want[name], err_msg=name)


def host_loaders(path: Path, framework: str):
    def safe_open_get() -> Dict[str, Any]:
        with fst.safe_open(path, framework, device="cpu") as f:
            return {n: f.get_tensor(n) for n in f.keys()}

    def safe_open_slices() -> Dict[str, Any]:
        with fst.safe_open(path, framework, device="cpu") as f:
            return {n: f.get_slice(n)[:] if f.get_shape(n) else f.get_tensor(n) for n in f.keys()}

    return {
        "load": lambda: fst.load(path, "cpu", framework=framework).tensors,
        "safe_open.get_tensor": safe_open_get,
        "safe_open.get_slice": safe_open_slices,
        "safe_open.load": lambda: fst.safe_open(path, framework, device="cpu").load("cpu").tensors,
        "device_map": lambda: fst.load(path, "cpu", framework=framework, device_map={"t1": "cpu"}).tensors,
    }


@pytest.mark.parametrize("loader", ["load", "safe_open.get_tensor", "safe_open.get_slice", "safe_open.load",
                                    "device_map"])
def test_host_tensors_are_64_byte_aligned_numpy(checkpoint, loader):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_placed(host_loaders(checkpoint, "numpy")[loader](), HOST_ALIGNMENT)


@pytest.mark.parametrize("loader", ["load", "safe_open.get_tensor", "safe_open.get_slice", "safe_open.load",
                                    "device_map"])
def test_host_tensors_are_64_byte_aligned_torch(checkpoint, loader):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_placed(host_loaders(checkpoint, "pt")[loader](), HOST_ALIGNMENT)
        check_placed(fst.load_file(checkpoint, "cpu"), HOST_ALIGNMENT)


def test_a_load_holds_its_data_plus_less_than_one_alignment_per_tensor(checkpoint):
    result = fst.load(checkpoint, "cpu", framework="numpy")
    data = sum(t.nbytes for t in odd_tensors().values())
    impl = fst._open(checkpoint, fst._ferry.SAFETENSORS_DEFAULT_MAX_HEADER_BYTES, 0, {})
    (region,) = impl.plan(-1, [], []).regions
    assert region[1] < data + HOST_ALIGNMENT * len(result.tensors)
    # One request for the whole run of tensors: they follow one another in the file.
    assert result.stats["requests"] == 1


def test_load_into_module_installs_aligned_parameters(checkpoint):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    import ferry.torch as ft

    kept = odd_tensors()

    class Holder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name, a in kept.items():
                dtype = torch.from_numpy(np.empty(1, a.dtype)).dtype
                self.register_parameter(name, torch.nn.Parameter(torch.zeros(a.shape, dtype=dtype), requires_grad=False))

    with ft.meta_parameters():
        module = Holder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = ft.load_into_module(module, checkpoint, device="cpu")
    assert (result.missing_keys, result.unexpected_keys, result.meta) == ([], [], [])
    params = dict(module.named_parameters())
    for name, a in kept.items():
        if a.size:
            assert params[name].data_ptr() % HOST_ALIGNMENT == 0, name
        np.testing.assert_array_equal(params[name].numpy(), a, err_msg=name)


@pytest.mark.watchdog(120)
@pytest.mark.parametrize("world", [1, 2])
def test_distributed_loads_place_tensors_aligned(checkpoint, tmp_path, world):
    pytest.importorskip("torch", reason="ferry.distributed needs PyTorch")
    code = textwrap.dedent(f"""
        import json, sys, torch, torch.distributed as dist
        import ferry.distributed as fd
        rank = int(sys.argv[1])
        dist.init_process_group("gloo", init_method="file://{tmp_path / 'rendezvous'}", rank=rank, world_size={world})
        got = fd.load({str(checkpoint)!r}, "cpu", process_group=dist.group.WORLD, timeout=60).tensors
        print(json.dumps({{n: [t.data_ptr() % 64, t.flatten().tolist()] for n, t in got.items()}}))
        dist.destroy_process_group()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in range(world)]
    outs = [p.communicate(timeout=100) for p in procs]
    want = odd_tensors()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        got = json.loads(out.strip().splitlines()[-1])
        for name, (misalignment, values) in got.items():
            assert misalignment == 0 or not want[name].size, name
            np.testing.assert_array_equal(np.asarray(values, dtype=want[name].dtype), want[name].ravel(), err_msg=name)


# ------------------------------------------------------------------------------------------- GPU


def _cuda_torch() -> Any:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device here")
    return torch


@pytest.mark.parametrize("loader", ["load", "load_file", "safe_open.get_tensor", "safe_open.load"])
def test_gpu_tensors_are_256_byte_aligned_and_cost_no_more_than_256_bytes_each(checkpoint, loader):
    torch = _cuda_torch()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(0)

    def get_tensors() -> Dict[str, Any]:
        with fst.safe_open(checkpoint, "pt", device="cuda:0") as f:
            return {n: f.get_tensor(n) for n in f.keys()}

    loaders = {
        "load": lambda: fst.load(checkpoint, "cuda:0").tensors,
        "load_file": lambda: fst.load_file(checkpoint, "cuda:0"),
        "safe_open.get_tensor": get_tensors,
        "safe_open.load": lambda: fst.safe_open(checkpoint, "pt", device="cuda:0").load().tensors,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensors = loaders[loader]()
    check_placed(tensors, DEVICE_ALIGNMENT)
    if loader in ("load", "load_file", "safe_open.load"):
        held = torch.cuda.memory_allocated(0) - before
        data = sum(t.nbytes for t in odd_tensors().values())
        # The caching allocator rounds a block up to 512 bytes.
        assert held <= data + DEVICE_ALIGNMENT * len(tensors) + 512, (held, data)


def test_gpu_cupy_tensors_are_256_byte_aligned(checkpoint):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    if cupy.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("CuPy sees no GPU")
    check_placed(fst.load(checkpoint, 0, framework="cupy").tensors, DEVICE_ALIGNMENT)
