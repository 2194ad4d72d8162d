"""Every spelling of a device that PyTorch users write reaches every safetensors entry point: "cuda", "cuda:0",
"cuda:1", torch.device("cuda"), torch.device("cuda", 0), 0, "cpu" and torch.device("cpu").

Before the fix, "cuda" and torch.device("cuda") raised TypeError everywhere (the device's ``index`` was
looked up on a ``str``), and a GPU device on a CPU-only torch raised torch's bare AssertionError. Now a GPU
spelling loads onto that GPU where PyTorch sees one, and elsewhere raises ferry.UnavailableError naming the
fix (device="cpu")."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np
import pytest

import ferry
from ferry import safetensors as fst

torch = pytest.importorskip("torch", reason="the device spellings are PyTorch's")
import ferry.torch as ftorch  # noqa: E402 (needs torch)

CPU_SPELLINGS: List[Any] = ["cpu", torch.device("cpu")]
GPU_SPELLINGS: List[Any] = ["cuda", "cuda:0", torch.device("cuda"), torch.device("cuda", 0), 0]


def _ids(spellings: List[Any]) -> List[str]:
    return [repr(s) for s in spellings]


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(4, 3))
        self.b = torch.nn.Parameter(torch.zeros(3))


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.safetensors"
    fst.save_file({"w": np.arange(12, dtype=np.float32).reshape(4, 3), "b": np.arange(3, dtype=np.float32)}, path)
    return path


def _entry_points(path: Path) -> Dict[str, Callable[[Any], Dict[str, Any]]]:
    """Each entry point, loading `path` onto a device: name -> device -> {tensor name: tensor}."""

    def into_module(device: Any) -> Dict[str, Any]:
        with ftorch.meta_parameters():
            model = Tiny()
        ftorch.load_into_module(model, path, device=device)
        return dict(model.named_parameters())

    def safe_open_get(device: Any) -> Dict[str, Any]:
        with fst.safe_open(path, "pt", device=device) as f:
            return {name: f.get_tensor(name) for name in f.keys()}

    def safe_open_load(device: Any) -> Dict[str, Any]:
        with fst.safe_open(path, "pt", device="cpu") as f:
            return f.load(device).tensors

    return {
        "load_file": lambda device: fst.load_file(path, device),
        "load": lambda device: fst.load(path, device).tensors,
        "safe_open.get_tensor": safe_open_get,
        "safe_open.load": safe_open_load,
        "load_into_module": into_module,
    }


ENTRY_POINTS = ["load_file", "load", "safe_open.get_tensor", "safe_open.load", "load_into_module"]


def _check_values(tensors: Dict[str, Any], device: Any) -> None:
    assert sorted(tensors) == ["b", "w"]
    for t in tensors.values():
        assert t.device == device
    assert tensors["w"].detach().cpu().flatten().tolist() == list(range(12))
    assert tensors["b"].detach().cpu().tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("device", CPU_SPELLINGS, ids=_ids(CPU_SPELLINGS))
def test_host_spellings_load_into_host_memory(checkpoint, entry, device):
    _check_values(_entry_points(checkpoint)[entry](device), torch.device("cpu"))


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("device", GPU_SPELLINGS, ids=_ids(GPU_SPELLINGS))
def test_gpu_spellings_load_onto_that_gpu_or_say_there_is_none(checkpoint, entry, device):
    load = _entry_points(checkpoint)[entry]
    if not torch.cuda.is_available():
        with pytest.raises(ferry.UnavailableError, match='PyTorch .* sees none .*pass device="cpu"'):
            load(device)
        return
    index = torch.cuda.current_device() if str(device) == "cuda" else 0
    _check_values(load(device), torch.device("cuda", index))


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_second_gpu_is_that_gpu_or_named_as_missing(checkpoint, entry):
    load = _entry_points(checkpoint)[entry]
    if torch.cuda.is_available() and torch.cuda.device_count() > 1:
        _check_values(load("cuda:1"), torch.device("cuda", 1))
        return
    with pytest.raises(ferry.UnavailableError, match="cuda:1"):
        load("cuda:1")


def test_the_default_device_without_cuda_names_the_fix(checkpoint):
    if torch.cuda.is_available():
        got = fst.load_file(checkpoint)
        assert all(t.device == torch.device("cuda", torch.cuda.current_device()) for t in got.values())
        return
    with pytest.raises(ferry.UnavailableError, match=r'default device .*pass device="cpu"'):
        fst.load_file(checkpoint)


def test_unknown_spellings_are_refused_by_name(checkpoint):
    for bad in ("gpu", "cuda:x", "cpu:1", -1):
        with pytest.raises(ValueError, match="device"):
            fst.load_file(checkpoint, bad)
    with pytest.raises(TypeError, match="not bool"):
        fst.load_file(checkpoint, True)


@pytest.mark.watchdog(120)
def test_distributed_loads_take_every_spelling(checkpoint, tmp_path):
    # A group of one, in a process of its own (a process group is process-wide state).
    code = textwrap.dedent(f"""
        import json, torch, torch.distributed as dist
        import ferry, ferry.distributed as fd
        dist.init_process_group("gloo", init_method="file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
        out = {{}}
        for spelling in ["cpu", torch.device("cpu"), "cuda", "cuda:0", torch.device("cuda"), torch.device("cuda", 0), 0]:
            try:
                got = fd.load({str(checkpoint)!r}, spelling, process_group=dist.group.WORLD, timeout=30).tensors
                out[repr(spelling)] = ["ok", str(got["w"].device), got["w"].cpu().flatten().tolist()]
            except Exception as e:
                out[repr(spelling)] = [type(e).__name__, str(e), repr(e.__cause__)]
        dist.destroy_process_group()
        print(json.dumps(out))
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout.strip().splitlines()[-1])
    for spelling, outcome in results.items():
        gpu = "cpu" not in spelling
        if not gpu:
            assert outcome == ["ok", "cpu", list(range(12))], (spelling, outcome)
        elif torch.cuda.is_available():
            assert outcome[0] == "ok" and outcome[1].startswith("cuda") and outcome[2] == list(range(12)), (spelling, outcome)
        else:
            # A group of one raises its own error (a larger group wraps it in DistributedLoadError).
            assert outcome[0] == "UnavailableError" and 'pass device="cpu"' in outcome[1], (spelling, outcome)
