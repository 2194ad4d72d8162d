"""safetensors checkpoints straight into GPU (or host) memory, through Ferry's engine.

A drop-in for ``safetensors.torch.load_file`` and ``safe_open``, at the speed of a plain copy::

    from ferry.safetensors import load_file, safe_open

    tensors = load_file("model.safetensors", device="cuda:0")      # {name: torch.Tensor}, like safetensors
    with safe_open("model.safetensors", framework="pt", device="cuda:0") as f:
        w = f.get_tensor("lm_head.weight")                          # reads only that tensor
        rows = f.get_slice("embed.weight")[1000:2000]                # reads only those rows

How it is fast: the header is parsed and validated in C++; each device gets one buffer (a ``torch.uint8``
tensor, a CuPy or NumPy array) holding every tensor placed on it, each tensor where the framework's own
allocator would put it (256-byte aligned on a GPU, 64 in host memory: GPU kernels choose by their operands'
alignment), and each run of tensors adjacent in the file is read with one parallel request whose bytes are
scattered to their places from the bounce buffers. The returned tensors are views of that buffer: it stays
alive exactly as long as any of them does (``torch.save`` of one such tensor would save the whole buffer;
``.clone()`` it first).

Checkpoints: a ``.safetensors`` file, a sharded ``model.safetensors.index.json`` (shards read in parallel),
or a directory holding either. ``device_map`` places tensors on several GPUs (and host memory);
``load(..., replicas=[1, 2])`` puts a whole copy on further GPUs while reading the file once.

Frameworks: ``"pt"`` (PyTorch, the default), ``"cupy"`` and ``"numpy"`` (``"np"``). CuPy and NumPy have no
bfloat16 or float8: BF16 tensors come back as raw ``uint16`` arrays and F8_E4M3/F8_E5M2 as raw ``uint8``
arrays, with the same shape (:func:`raw_dtypes` lists them; :meth:`safe_open.get_dtype` tells the real
one). torch and CuPy are imported only when asked for.

Errors: a malformed checkpoint raises :class:`ferry.InvalidArgumentError` (a ``ValueError``) naming the file
and the tensor, before anything is written to memory; missing files ``FileNotFoundError``; I/O failures
``OSError`` subclasses; Ctrl-C during a load raises ``KeyboardInterrupt`` once the reads in flight stop.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _args, _ferry, _progress
from ._config import _overrides
from ._errors import UnavailableError, invalid_argument

__all__ = [
    "load_file",
    "load",
    "load_into",
    "safe_open",
    "LoadResult",
    "raw_dtypes",
    "DTYPE_SIZES",
]

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


def load(filename: PathLike, device: Device = None, *, framework: str = "pt",
         device_map: Optional[Mapping[str, Device]] = None, replicas: Iterable[Device] = (), progress: Progress = None,
         max_request_bytes: int = 0, max_requests_in_flight: int = 0, max_staging_bytes: int = 0,
         max_header_bytes: int = _ferry.SAFETENSORS_DEFAULT_MAX_HEADER_BYTES, process_group: Any = None,
         shard_rules: Any = None, timeout: Any = None, **settings: Any) -> LoadResult:
    """Loads a checkpoint and says how: tensors, metadata, the route report and timings (:class:`LoadResult`).

    ``filename``: a ``.safetensors`` file, a ``model.safetensors.index.json`` or a directory holding either.
    ``device``: ``"cuda:N"``, ``"cuda"`` (the current device), ``N``, or ``"cpu"``; None: the current CUDA
    device (cuda:0 unless changed) for PyTorch and CuPy, host memory for NumPy. ``device_map``: tensor
    name or prefix -> device; a prefix matches whole name components (``"model.layers.1"`` matches
    ``"model.layers.1.mlp.w"``, not ``"model.layers.10.w"``), ``""`` matches all, the longest match wins,
    unmatched names go to ``device``. ``replicas``: further GPUs that each get a whole copy, made GPU to GPU
    while the file is read once (needs a GPU ``device`` and no device map).

    ``progress``: None (a bar on stderr for checkpoints of 256 MiB or more, when stderr is a terminal), True (a
    bar whenever stderr is a terminal), False, or a callable ``(bytes_done, bytes_total)``; returning False
    from it cancels the load (:class:`ferry.FerryError` with code ``cancelled``).

    Request shaping: ``max_request_bytes`` (the largest single read; 0: one per run of tensors),
    ``max_requests_in_flight`` (0: no limit of its own; a read starts only while those in flight leave one
    of Ferry's threads without a task, so a whole shard is read alone), ``max_staging_bytes`` (a cap on
    pinned bounce-buffer memory in use; 0: Ferry's settings decide). Other keyword arguments are Ferry settings for these reads (``threads=8``, ``compat_mode="off"``, ...).

    ``process_group`` (a ``torch.distributed`` group; every rank calls ``load`` alike): every rank gets the
    checkpoint while each byte is read from storage by one rank and exchanged over the group; with
    ``shard_rules`` each rank gets only its slice of the tensors they split; ``timeout`` bounds every wait for
    peers. See :func:`ferry.distributed.load` (no ``device_map`` or ``replicas`` then).
    """
    if process_group is not None or shard_rules is not None:
        if device_map or tuple(replicas):
            raise ValueError("process_group loads cannot be combined with device_map or replicas")
        from . import distributed

        return distributed.load(filename, device, process_group=process_group, shard_rules=shard_rules,
                                timeout=timeout, framework=framework, progress=progress,
                                max_request_bytes=max_request_bytes, max_requests_in_flight=max_requests_in_flight,
                                max_staging_bytes=max_staging_bytes, max_header_bytes=max_header_bytes, **settings)
    if timeout is not None:
        raise TypeError("timeout bounds the waits of a process_group load: pass process_group too")
    started = time.perf_counter()
    fw = _framework(framework)
    impl = _open(filename, max_header_bytes, max_staging_bytes, settings)
    opened = time.perf_counter()
    ckpt = _Checkpoint(impl, fw)
    dev = _device_index(device, fw)
    mapping = [(str(k), _device_index(v, fw)) for k, v in (device_map or {}).items()]
    copies = [_device_index(r, fw) for r in replicas]
    result = ckpt.load(dev, mapping, copies, progress, max_request_bytes, max_requests_in_flight, started)
    result.stats["open_seconds"] = opened - started
    return result


def load_file(filename: PathLike, device: Device = None, *, framework: str = "pt", **options: Any) -> Dict[str, Any]:
    """``safetensors.torch.load_file`` through Ferry: a dict name -> tensor on ``device``.

    The same result as safetensors' for the same ``device`` (names, dtypes, shapes, values, device); the
    tensors of one device share one buffer that lives as long as any of them. Unlike safetensors', whose
    ``device`` defaults to ``"cpu"``, the default here is the current CUDA device (``"cuda:0"``), since
    reading into GPU memory is what Ferry is for; pass ``device="cpu"`` for host memory. Where PyTorch sees
    no CUDA device, the default (and any GPU) raises :class:`ferry.UnavailableError` saying so. Options as
    :func:`load` (``device_map``, ``progress``, Ferry settings, ...).
    """
    return load(filename, device, framework=framework, **options).tensors


def _check_destination(name: str, target: Any, dtype: str, shape: Tuple[int, ...]) -> None:
    """Refuses a destination whose shape or dtype differs from the checkpoint's (same-size mix-ups such as
    float16 for bfloat16 would otherwise load garbage silently)."""
    got_shape = getattr(target, "shape", None)
    if got_shape is not None and tuple(int(d) for d in got_shape) != tuple(shape):
        raise ValueError(f"tensor {name!r} has shape {list(shape)} in the checkpoint, its destination "
                         f"{list(got_shape)}")
    got_dtype = getattr(target, "dtype", None)
    if got_dtype is None:
        return
    text = str(got_dtype)
    if text.startswith("torch."):
        allowed = {_TORCH_NAMES[dtype]}
    else:
        allowed = {_ArrayLibrary._NAMES.get(dtype, ""), _ArrayLibrary._RAW.get(dtype, ""), "bool" if dtype == "BOOL" else ""}
        text = text.replace("numpy.", "")
    if text.replace("torch.", "") not in allowed:
        raise ValueError(f"tensor {name!r} is {dtype} in the checkpoint, but its destination is {text}")


def load_into(filename: PathLike, tensors: Mapping[str, Any], *, progress: Progress = False,
              max_request_bytes: int = 0, max_requests_in_flight: int = 0, **settings: Any) -> Dict[str, Any]:
    """Reads the checkpoint's values into existing tensors (refreshing weights in place, no allocation).

    ``tensors``: name -> a contiguous tensor/array (PyTorch tensors and parameters, CuPy, NumPy, anything with
    ``__cuda_array_interface__``, DLPack or the buffer protocol) with the checkpoint tensor's shape and dtype
    (for CuPy/NumPy, BF16 and F8 as their raw integer types). Every destination is checked before anything is
    read: unknown names raise ``KeyError``, shape, dtype or size mismatches ``ValueError``. Returns the load's
    stats (as :attr:`LoadResult.stats`, with a ``report``).
    """
    from ._buffers import acquire

    started = time.perf_counter()
    impl = _open(filename, _ferry.SAFETENSORS_DEFAULT_MAX_HEADER_BYTES, 0, settings)
    rows = {row[0]: row for row in impl.tensors()}
    items = []
    keep = []
    total = 0
    for name, target in tensors.items():
        if name not in rows:
            raise KeyError(f"the checkpoint has no tensor {name!r}")
        _, dtype, shape, nbytes = rows[name][:4]
        _check_destination(name, target, dtype, shape)
        if callable(getattr(target, "detach", None)):
            target = target.detach()  # a parameter that requires grad exports no __cuda_array_interface__
        buf = acquire(target, for_read=True)
        if buf.nbytes != nbytes:
            raise ValueError(f"tensor {name!r} is {nbytes} bytes in the checkpoint, but its destination holds "
                             f"{buf.nbytes}")
        keep.append(buf)
        items.append((name, int(buf.address), 0, nbytes))
        total += nbytes
    label = f"loading {os.path.basename(_args.display(filename))}"
    stats = dict(impl.read_into(items, int(max_request_bytes), int(max_requests_in_flight),
                                _progress_callback(progress, total, label)))
    stats["report"] = _report(stats["report"])
    stats["seconds"] = time.perf_counter() - started
    return stats


# ------------------------------------------------------------------------------------------ safe_open


class _Slice:
    """``safe_open.get_slice(name)``: shape and dtype without reading; indexing reads only the rows of the
    first dimension it needs (``[a:b]``, ``[a:b:step]``, ``[i]``, ``[a:b, ...]``, ``[a:b, c:d]``: the
    first dimension picks the bytes read, the others are applied on the device afterwards)."""

    def __init__(self, owner: "safe_open", tensor: _Tensor) -> None:
        self._owner = owner
        self._tensor = tensor

    def get_shape(self) -> List[int]:
        return list(self._tensor.shape)

    def get_dtype(self) -> str:
        return self._tensor.dtype

    def __len__(self) -> int:
        if not self._tensor.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._tensor.shape[0]

    def __getitem__(self, key: Any) -> Any:
        t = self._tensor
        ckpt = self._owner._ckpt
        fw = ckpt.fw
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            if key[-1] is not Ellipsis or sum(k is Ellipsis for k in key) > 1:
                raise IndexError("get_slice supports '...' only as the last index")
            key = key[:-1]
        shape = tuple(t.shape)
        if len(key) > len(shape):
            raise IndexError(f"too many indices for a tensor of {len(shape)} dimension(s)")
        if not shape or not key:
            return self._owner.get_tensor(t.name)
        first, rest = key[0], key[1:]
        n0 = shape[0]
        row_bytes = t.nbytes // n0 if n0 else 0
        drop = False
        if isinstance(first, slice):
            start, stop, step = first.indices(n0)
            if step < 1:
                raise IndexError("get_slice supports positive steps only")
            rows = len(range(start, stop, step))
        elif hasattr(first, "__index__") and not isinstance(first, bool):
            i = first.__index__()
            if i < -n0 or i >= n0:
                raise IndexError(f"index {i} is out of bounds for dimension 0 with size {n0}")
            start, step, rows, drop = i % n0, 1, 1, True
        else:
            raise TypeError(f"get_slice takes ints and slices, not {type(first).__name__}")
        span = (rows - 1) * step + 1 if rows else 0
        buf = ckpt.read(t.name, start * row_bytes, span * row_bytes, self._owner._device)
        out = ckpt.view(buf, 0, t, (span,) + shape[1:])
        if step > 1:
            out = out[::step]
        if drop:
            out = out[0]
        if rest:
            out = out[(slice(None),) * (0 if drop else 1) + tuple(rest)]
        if step > 1 or rest:
            out = fw.contiguous(out)
        return out


class safe_open:  # noqa: N801 (the name safetensors users know)
    """``safetensors.safe_open`` through Ferry: the header is read and validated at once, tensors lazily.

    ``framework``: "pt", "cupy" or "numpy"; ``device``: "cpu", "cuda", "cuda:N" or N. ``keys()`` is sorted
    (as safetensors'), ``offset_keys()`` in file order; ``metadata()`` is None when the file has none.
    ``get_tensor(name)`` reads one tensor with one parallel pread; ``get_slice(name)[a:b]`` only the rows
    asked for; ``load()`` everything at once (as :func:`load`). Also works as a context manager.
    """

    def __init__(self, filename: PathLike, framework: str = "pt", device: Device = "cpu", *,
                 max_header_bytes: int = _ferry.SAFETENSORS_DEFAULT_MAX_HEADER_BYTES, max_staging_bytes: int = 0,
                 **settings: Any) -> None:
        fw = _framework(framework)
        impl = _open(filename, max_header_bytes, max_staging_bytes, settings)
        self._ckpt = _Checkpoint(impl, fw)
        self._device = _device_index(device, fw)

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def keys(self) -> List[str]:
        return sorted(self._ckpt.by_name)

    def offset_keys(self) -> List[str]:
        return [t.name for t in self._ckpt.tensors]

    def metadata(self) -> Optional[Dict[str, str]]:
        return dict(self._ckpt.impl.metadata()) or None

    def files(self) -> List[str]:
        """The shard files (one for a plain checkpoint)."""
        return list(self._ckpt.files)

    def get_dtype(self, name: str) -> str:
        """The tensor's safetensors dtype ("BF16", ...), whatever the framework returns for it."""
        return self._ckpt.tensor(name).dtype

    def get_shape(self, name: str) -> List[int]:
        return list(self._ckpt.tensor(name).shape)

    def get_tensor(self, name: str) -> Any:
        t = self._ckpt.tensor(name)
        buf = self._ckpt.read(t.name, 0, t.nbytes, self._device)
        return self._ckpt.view(buf, 0, t)

    def get_slice(self, name: str) -> _Slice:
        return _Slice(self, self._ckpt.tensor(name))

    def load(self, device: Device = None, *, device_map: Optional[Mapping[str, Device]] = None,
             replicas: Iterable[Device] = (), progress: Progress = None, max_request_bytes: int = 0,
             max_requests_in_flight: int = 0) -> LoadResult:
        """Every tensor at once, as :func:`load` does (``device`` defaults to the one given at open)."""
        started = time.perf_counter()
        fw = self._ckpt.fw
        dev = self._device if device is None else _device_index(device, fw)
        mapping = [(str(k), _device_index(v, fw)) for k, v in (device_map or {}).items()]
        return self._ckpt.load(dev, mapping, [_device_index(r, fw) for r in replicas], progress, max_request_bytes,
                               max_requests_in_flight, started)

    def __repr__(self) -> str:
        return f"<ferry.safetensors.safe_open {self._ckpt.files[0]!r} {len(self._ckpt.tensors)} tensors>"



# Saving: ferry/_save.py (save_file, save_sharded, background saves).
from ._save import SaveHandle, SaveResult, ShardedSaveResult, save_file, save_sharded  # noqa: E402

__all__ += ["save_file", "save_sharded", "SaveHandle", "SaveResult", "ShardedSaveResult"]
