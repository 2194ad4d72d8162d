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

import os
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from . import _args, _ferry, _progress
from ._checkpoint import (DTYPE_SIZES, PROGRESS_BAR_MIN_BYTES, Device, LoadResult, PathLike, Progress, _Checkpoint,
                          _ArrayLibrary, _device_index, _framework, _open, _progress_callback, _report,
                          _TORCH_NAMES, _Tensor, raw_dtypes)
from ._save import SaveHandle, SaveResult, ShardedSaveResult, save_file, save_sharded

__all__ = [
    "load_file",
    "load",
    "load_into",
    "safe_open",
    "LoadResult",
    "raw_dtypes",
    "DTYPE_SIZES",
    "save_file",
    "save_sharded",
    "SaveHandle",
    "SaveResult",
    "ShardedSaveResult",
]

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
