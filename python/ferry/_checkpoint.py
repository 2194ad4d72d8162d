"""The core of loading safetensors checkpoints, shared by :mod:`ferry.safetensors` (the public API) and
:mod:`ferry.distributed` (loads by a process group), below both so that neither imports the other back: the
array libraries a load makes tensors for (PyTorch, CuPy, NumPy), device spellings, an opened checkpoint and
its plan, allocation and views (:class:`_Checkpoint`), and what a load returns (:class:`LoadResult`).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _args, _ferry, _progress
from ._config import _overrides
from ._errors import UnavailableError, invalid_argument

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
Device = Union[str, int, None]
Progress = _progress.Progress

#: Bytes per element of every safetensors dtype.
DTYPE_SIZES: Dict[str, int] = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
    "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8,
}

#: Checkpoints at least this large get a progress bar on a terminal (progress=None), loading and saving.
PROGRESS_BAR_MIN_BYTES = _progress.CHECKPOINT_BAR_MIN_BYTES
_HOST = -1


# ---------------------------------------------------------------------------------------- frameworks


class _Framework:
    """How one array library allocates a byte buffer and views a dtype/shape inside it."""

    name = ""

    def dtype(self, st_dtype: str) -> Any:
        raise NotImplementedError

    def raw(self, st_dtype: str) -> bool:
        """True when this library has no such dtype and a raw integer view stands in."""
        return False

    def default_cuda_device(self) -> int:
        return 0

    def allocate(self, nbytes: int, device: int) -> Any:
        """A 1-D uint8 buffer of at least ``nbytes`` on ``device`` (-1: host memory)."""
        raise NotImplementedError

    def address(self, buf: Any) -> int:
        raise NotImplementedError

    def synchronize(self, device: int) -> None:
        """Waits for work the library queued that may still touch newly allocated memory."""

    def view(self, buf: Any, offset: int, nbytes: int, st_dtype: str, shape: Tuple[int, ...]) -> Any:
        """``nbytes`` of ``buf`` from ``offset`` as an array of ``st_dtype`` and ``shape`` (the same bytes)."""
        return buf[offset:offset + nbytes].view(self.dtype(st_dtype)).reshape(shape)

    def contiguous(self, array: Any) -> Any:
        raise NotImplementedError


# safetensors dtype -> the torch attribute that holds it (torch.uint16 and the float8 types need torch >= 2.1/2.3).
_TORCH_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32", "I64": "int64",
    "U16": "uint16", "U32": "uint32", "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
    "F32": "float32", "F64": "float64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}


class _Torch(_Framework):
    name = "pt"

    def __init__(self) -> None:
        try:
            import torch
        except ImportError as e:
            raise ImportError("framework='pt' needs PyTorch (import torch failed: %s)" % e) from None
        self.torch = torch
        self.dtypes = {k: getattr(torch, v) for k, v in _TORCH_NAMES.items() if hasattr(torch, v)}

    def dtype(self, st_dtype: str) -> Any:
        try:
            return self.dtypes[st_dtype]
        except KeyError:
            raise TypeError(f"this PyTorch ({self.torch.__version__}) has no dtype for safetensors {st_dtype}") from None

    def _require_cuda(self, asked: str, index: int = 0) -> None:
        # torch itself answers a CUDA device on a CPU-only build with an AssertionError that names no fix.
        if not self.torch.cuda.is_available():
            raise UnavailableError(f"{asked} needs a CUDA device, and PyTorch {self.torch.__version__} sees none "
                                   "(torch.cuda.is_available() is False): pass device=\"cpu\" to load into host memory")
        count = self.torch.cuda.device_count()
        if index >= count:
            raise UnavailableError(f"{asked} does not exist: PyTorch sees {count} CUDA device(s), cuda:0 to cuda:{count - 1}")

    def default_cuda_device(self) -> int:
        self._require_cuda("the default device (the current CUDA device)")
        return int(self.torch.cuda.current_device())

    def _device(self, device: int) -> Any:
        return self.torch.device("cpu") if device == _HOST else self.torch.device("cuda", device)

    def allocate(self, nbytes: int, device: int) -> Any:
        if device != _HOST:
            self._require_cuda(f"cuda:{device}", device)
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device=self._device(device))

    def address(self, buf: Any) -> int:
        return int(buf.data_ptr())

    def synchronize(self, device: int) -> None:
        # The caching allocator may hand out memory that kernels queued on the current stream still use.
        if device != _HOST:
            self.torch.cuda.current_stream(device).synchronize()

    def contiguous(self, array: Any) -> Any:
        return array.contiguous()


class _ArrayLibrary(_Framework):
    """NumPy and CuPy: the same dtypes, and no bfloat16 or float8 (raw integer views instead)."""

    _RAW = {"BF16": "uint16", "F8_E4M3": "uint8", "F8_E5M2": "uint8"}
    _NAMES = {
        "BOOL": "bool_", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16", "U32": "uint32",
        "I32": "int32", "U64": "uint64", "I64": "int64", "F16": "float16", "F32": "float32", "F64": "float64",
    }

    def __init__(self, module: Any) -> None:
        self.xp = module

    def dtype(self, st_dtype: str) -> Any:
        return getattr(self.xp, self._NAMES.get(st_dtype) or self._RAW[st_dtype])

    def raw(self, st_dtype: str) -> bool:
        return st_dtype in self._RAW

    def contiguous(self, array: Any) -> Any:
        return self.xp.ascontiguousarray(array)


class _NumPy(_ArrayLibrary):
    name = "numpy"

    def __init__(self) -> None:
        import numpy

        super().__init__(numpy)

    def allocate(self, nbytes: int, device: int) -> Any:
        if device != _HOST:
            raise ValueError(f"framework='numpy' loads into host memory only, not cuda:{device}")
        return self.xp.empty(nbytes, dtype=self.xp.uint8)

    def address(self, buf: Any) -> int:
        return int(buf.ctypes.data)


class _CuPy(_ArrayLibrary):
    name = "cupy"

    def __init__(self) -> None:
        try:
            import cupy
        except ImportError as e:
            raise ImportError("framework='cupy' needs CuPy (import cupy failed: %s)" % e) from None
        super().__init__(cupy)

    def default_cuda_device(self) -> int:
        return int(self.xp.cuda.Device().id)

    def allocate(self, nbytes: int, device: int) -> Any:
        if device == _HOST:
            raise ValueError("framework='cupy' loads into GPU memory; use framework='numpy' for host memory")
        with self.xp.cuda.Device(device):
            return self.xp.empty(nbytes, dtype=self.xp.uint8)

    def address(self, buf: Any) -> int:
        return int(buf.data.ptr)

    def synchronize(self, device: int) -> None:
        with self.xp.cuda.Device(device):
            self.xp.cuda.get_current_stream().synchronize()


_FRAMEWORKS = {"pt": _Torch, "torch": _Torch, "pytorch": _Torch, "numpy": _NumPy, "np": _NumPy, "cupy": _CuPy,
               "cp": _CuPy}


def _framework(name: str) -> _Framework:
    try:
        return _FRAMEWORKS[str(name).lower()]()
    except KeyError:
        raise ValueError(f"unknown framework {name!r} (use 'pt', 'cupy' or 'numpy')") from None


def raw_dtypes(framework: str) -> Dict[str, str]:
    """safetensors dtypes that ``framework`` cannot represent, and the raw dtype returned instead:
    ``{"BF16": "uint16", "F8_E4M3": "uint8", "F8_E5M2": "uint8"}`` for NumPy and CuPy, ``{}`` for PyTorch."""
    return {} if str(framework).lower() in ("pt", "torch", "pytorch") else dict(_ArrayLibrary._RAW)


def _device_index(device: Device, fw: _Framework) -> int:
    """'cuda:1' / 'cuda' / 1 / 'cpu' / torch.device -> CUDA ordinal, or -1 for host memory. None: the
    framework's default (host memory for NumPy, the current CUDA device otherwise)."""
    if device is None:
        return _HOST if isinstance(fw, _NumPy) else fw.default_cuda_device()
    if isinstance(device, bool):
        raise TypeError("device must be a str, an int or a torch.device, not bool")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"device must be a CUDA ordinal (>= 0) or 'cpu', not {device}")
        return device
    # A torch.device prints as its spelling: torch.device("cuda", 1) is "cuda:1", torch.device("cuda") "cuda".
    text = device if isinstance(device, str) else str(device)
    kind, _, index = text.partition(":")
    if kind == "cpu" and index in ("", "0"):
        return _HOST
    if kind == "cuda" and not index:
        return fw.default_cuda_device()
    if kind == "cuda" and index.isdigit():
        return int(index)
    raise ValueError(f"unknown device {device!r} (use 'cpu', 'cuda', 'cuda:N' or N)")


# ------------------------------------------------------------------------------------------ progress


def _progress_callback(progress: Progress, total: int, label: str) -> Optional[Callable[[int, int], Any]]:
    """The package's one progress policy, automatic (progress=None) from PROGRESS_BAR_MIN_BYTES."""
    return _progress.callback(progress, total, label, automatic_from_bytes=PROGRESS_BAR_MIN_BYTES)


# ---------------------------------------------------------------------------------------- checkpoints


def _open(filename: PathLike, max_header_bytes: int, max_staging_bytes: int,
          settings: Dict[str, Any]) -> "_ferry.SafetensorsCheckpoint":
    # Bytes, as the kernel gets them: names that are not UTF-8 (str with surrogate escapes, or bytes) work.
    return _ferry.SafetensorsCheckpoint.open(_args.fs_path(filename), _overrides(settings, "unknown setting"),
                                             int(max_header_bytes),
                                             int(max_staging_bytes))


class _Tensor:
    __slots__ = ("index", "name", "dtype", "shape", "nbytes", "shard", "file_offset")

    def __init__(self, index: int, row: Tuple[str, str, Tuple[int, ...], int, int, int]) -> None:
        self.index = index
        self.name, self.dtype, self.shape, self.nbytes, self.shard, self.file_offset = row


class LoadResult:
    """What :func:`load` returns.

    ``tensors``: name -> tensor on its device. ``replicas``: one such dict per replica GPU, in the order
    asked. ``metadata``: the ``__metadata__`` strings (None when the file has none). ``report``: the route
    report of every read (a :class:`ferry.Report`). ``stats``: ``bytes_read``, ``bytes_copied`` (GPU to
    GPU), ``requests``, ``seconds`` (from the call to tensors ready), ``open_seconds``, ``allocate_seconds``,
    ``read_seconds``, ``views_seconds``, ``gib_per_s``, ``notes`` (settings the load adjusted, and why, plus
    facts found while opening), ``files``.
    """

    __slots__ = ("tensors", "replicas", "metadata", "report", "stats")

    def __init__(self, tensors: Dict[str, Any], replicas: List[Dict[str, Any]], metadata: Optional[Dict[str, str]],
                 report: Any, stats: Dict[str, Any]) -> None:
        self.tensors = tensors
        self.replicas = replicas
        self.metadata = metadata
        self.report = report
        self.stats = stats

    def __repr__(self) -> str:
        return (f"<ferry.safetensors.LoadResult {len(self.tensors)} tensors, {_progress.format_bytes(self.stats['bytes_read'])} "
                f"in {self.stats['seconds']:.3f} s ({self.stats['gib_per_s']:.2f} GiB/s)>")


def _report(parts: Any) -> Any:
    from ._report import Report

    return Report._from_parts(parts)


class _Checkpoint:
    """An opened checkpoint and the framework its tensors are made for."""

    def __init__(self, impl: "_ferry.SafetensorsCheckpoint", fw: _Framework) -> None:
        self.impl = impl
        self.fw = fw
        self.tensors = [_Tensor(i, row) for i, row in enumerate(impl.tensors())]
        self.by_name = {t.name: t for t in self.tensors}
        self.files = [os.fsdecode(f) for f in impl.files()]

    def label(self) -> str:
        name = os.path.basename(self.files[0]) if self.files else "checkpoint"
        return f"loading {name}" + (f" (+{len(self.files) - 1} shards)" if len(self.files) > 1 else "")

    def tensor(self, name: str) -> _Tensor:
        try:
            return self.by_name[name]
        except KeyError:
            raise KeyError(f"{self.files[0] if len(self.files) == 1 else 'the checkpoint'} has no tensor {name!r}") from None

    def view(self, buf: Any, offset: int, t: _Tensor, shape: Optional[Tuple[int, ...]] = None) -> Any:
        """``t`` (or its first rows, for ``shape``) from ``offset`` of ``buf``, as the framework's array. A shape
        the format allows but the framework cannot make (NumPy's dimension limit, sizes past its index type)
        raises :class:`ferry.InvalidArgumentError` naming the file and the tensor."""
        shape = t.shape if shape is None else shape
        nbytes = math.prod(shape) * DTYPE_SIZES[t.dtype]
        try:
            return self.fw.view(buf, offset, nbytes, t.dtype, shape)
        except (ValueError, RuntimeError) as e:
            path = self.files[t.shard]
            raise invalid_argument(f"tensor {t.name!r} of {path!r} ({t.dtype}, shape {list(t.shape)}) cannot be a "
                                   f"{self.fw.name} array: {e}", path) from e

    def buffer(self, nbytes: int, device: int, alignment: int) -> Tuple[Any, int]:
        """A buffer of ``nbytes`` at an address aligned to ``alignment``: (buffer view, address). Exactly
        ``nbytes`` where the allocator aligns as asked (PyTorch's and CuPy's GPU allocators give 512 bytes),
        else ``alignment`` more, to start at an aligned address inside."""
        raw = self.fw.allocate(nbytes, device)
        base = self.fw.address(raw)
        if nbytes and base % alignment:
            del raw
            raw = self.fw.allocate(nbytes + alignment, device)
            base = self.fw.address(raw)
        pad = (-base) % alignment if nbytes else 0
        return raw[pad:pad + nbytes], base + pad

    def load(self, device: int, device_map: Sequence[Tuple[str, int]], replicas: Sequence[int], progress: Progress,
             max_request_bytes: int, max_requests_in_flight: int, started: float) -> LoadResult:
        plan = self.impl.plan(device, list(device_map), list(replicas))
        t_alloc = time.perf_counter()
        buffers: List[Any] = []
        bases: List[int] = []
        devices = set()
        for region_device, size, alignment, _copy_of in plan.regions:
            buf, address = self.buffer(size, region_device, alignment)
            buffers.append(buf)
            bases.append(address)
            devices.add(region_device)
        for d in sorted(devices):
            self.fw.synchronize(d)
        t_read = time.perf_counter()
        callback = _progress_callback(progress, plan.read_bytes, self.label())
        stats = dict(self.impl.load_into(plan, bases, int(max_request_bytes), int(max_requests_in_flight), callback))
        t_views = time.perf_counter()
        regions = plan.regions
        placements = plan.placements
        tensors: Dict[str, Any] = {}
        views: List[Tuple[str, int, int]] = []
        for tensor_index, region, offset in placements:
            t = self.tensors[tensor_index]
            views.append((t.name, region, offset))
        for name, region, offset in sorted(views):
            tensors[name] = self.view(buffers[region], offset, self.by_name[name])
        copies: List[Dict[str, Any]] = []
        for replica in replicas:
            region_copy = {copy_of: r for r, (d, _s, _a, copy_of) in enumerate(regions) if copy_of >= 0 and d == replica}
            copies.append({name: self.view(buffers[region_copy[region]], offset, self.by_name[name])
                           for name, region, offset in sorted(views)})
        done = time.perf_counter()
        seconds = done - started
        stats.update(
            seconds=seconds,
            allocate_seconds=t_read - t_alloc,
            read_seconds=t_views - t_read,
            views_seconds=done - t_views,
            gib_per_s=stats["bytes_read"] / seconds / (1 << 30) if seconds > 0 else 0.0,
            files=self.files,
        )
        stats["notes"] = list(stats["notes"]) + list(self.impl.notes())
        report = _report(stats.pop("report"))
        metadata = dict(self.impl.metadata()) or None
        return LoadResult(tensors, copies, metadata, report, stats)

    def read(self, name: str, offset: int, nbytes: int, device: int, progress: Progress = False) -> Any:
        """``nbytes`` of tensor ``name`` from byte ``offset``, into a new aligned uint8 buffer."""
        alignment = 4096 if device == _HOST else 256
        buf, address = self.buffer(nbytes, device, alignment)
        self.fw.synchronize(device)
        if nbytes:
            callback = _progress_callback(progress, nbytes, f"reading {name}")
            self.impl.read_into([(name, address, offset, nbytes)], 0, 0, callback)
        return buf
