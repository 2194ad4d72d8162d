"""Saving safetensors checkpoints from GPU (or host) memory: ``save_file``, ``save_sharded``, ``SaveHandle``.

Re-exported by :mod:`ferry.safetensors`. The files are byte-identical to what ``safetensors.torch.save_file``
and ``safetensors.numpy.save_file`` write for the same tensors and metadata (the one difference: with more
than one metadata key the reference writes them in hash order, which changes from run to run; Ferry sorts
them). Each tensor is checked the way its framework's reference checks it, before anything is written:

- PyTorch (and CuPy, which has no reference): sparse, meta-device and non-contiguous tensors are refused,
  and so are tensors whose memory overlaps another's (``ValueError`` naming them);
- NumPy: non-contiguous and non-native byte order arrays are saved as ``numpy.ascontiguousarray`` /
  little-endian copies, and overlapping arrays are each saved in full, as ``safetensors.numpy`` does.

The bytes move from GPU memory through pinned staging windows into Ferry's writes (O_DIRECT for durable
saves), never through pageable copies, and the file appears under its name only when complete: written
under no name in the target's directory, ``fdatasync``'ed, renamed over the target, and the directory synced
(``durable=False`` skips the syncs). A process killed at any moment leaves the old file or the new one.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from . import _args, _ferry, _progress
from ._checkpoint import DTYPE_SIZES, _ArrayLibrary, _TORCH_NAMES
from ._config import _overrides
from ._errors import invalid_argument

__all__ = ["save_file", "save_sharded", "SaveHandle", "SaveResult", "ShardedSaveResult"]

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

def _dtype_names(kind: str) -> Dict[str, str]:
    """A framework's dtype name -> the safetensors dtype: the loader's tables (ferry/safetensors.py), inverted,
    with ml_dtypes' names for NumPy arrays of bfloat16 and float8."""

    if kind == "torch":
        return {v: k for k, v in _TORCH_NAMES.items()}
    names = {("bool" if v == "bool_" else v): k for k, v in _ArrayLibrary._NAMES.items()}
    names.update(bfloat16="BF16", float8_e4m3fn="F8_E4M3", float8_e5m2="F8_E5M2")
    return names


def _kind(value: Any) -> str:
    module = type(value).__module__ or ""
    if module.startswith("torch") and hasattr(value, "data_ptr") and hasattr(value, "layout"):
        return "torch"
    if module.startswith("cupy") and hasattr(value, "data") and hasattr(value, "device"):
        return "cupy"
    if module == "numpy" and type(value).__name__ == "ndarray":
        return "numpy"
    return "other"


class _Tensor:
    """One tensor as the C++ save takes it, and what must stay alive until the snapshot."""

    __slots__ = ("name", "dtype", "shape", "address", "keep", "cuda_device", "framework")

    def __init__(self, name: str, dtype: str, shape: Tuple[int, ...], address: int, keep: Any,
                 cuda_device: Optional[int], framework: str) -> None:
        self.name, self.dtype, self.shape, self.address = name, dtype, shape, address
        self.keep, self.cuda_device, self.framework = keep, cuda_device, framework

    def row(self) -> Tuple[str, str, List[int], int]:
        return (self.name, self.dtype, list(self.shape), self.address)


def _dtype_name(name: str, known: Mapping[str, str], have: str, override: Optional[str], itemsize: int) -> str:
    if override is not None:
        if override not in DTYPE_SIZES:
            raise ValueError(f"tensor {name!r}: dtypes[{name!r}] = {override!r} is not a safetensors dtype "
                             f"({', '.join(DTYPE_SIZES)})")
        if DTYPE_SIZES[override] != itemsize:
            raise ValueError(f"tensor {name!r}: dtypes[{name!r}] = {override!r} has {DTYPE_SIZES[override]}-byte "
                             f"elements, but the tensor's {have} has {itemsize}-byte ones")
        return override
    try:
        return known[have]
    except KeyError:
        raise ValueError(f"tensor {name!r} is {have}, which safetensors cannot hold (it holds "
                         f"{', '.join(sorted(set(known)))})") from None


def _from_torch(name: str, t: Any, override: Optional[str]) -> _Tensor:
    import torch

    if t.layout != torch.strided:
        raise ValueError(f"tensor {name!r} is a sparse tensor ({t.layout}), which safetensors cannot hold: make it "
                         "dense first (.to_dense(); the file may be much larger)")
    if t.device.type == "meta":
        raise ValueError(f"tensor {name!r} is on the meta device and has no data to save")
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"tensor {name!r} is on {t.device}; Ferry saves from CPU and CUDA memory")
    if not t.is_contiguous():
        raise ValueError(f"tensor {name!r} is not contiguous, which safetensors does not allow: it may be a view "
                         "of another tensor (save the whole tensor and slice it after loading), or call "
                         ".contiguous() on it before saving")
    dtype = _dtype_name(name, _dtype_names("torch"), str(t.dtype).replace("torch.", ""), override, t.element_size())
    t = t.detach()
    device = t.device.index if t.device.type == "cuda" else None
    if device is None and t.device.type == "cuda":
        device = torch.cuda.current_device()
    return _Tensor(name, dtype, tuple(int(d) for d in t.shape), int(t.data_ptr()), t, device, "torch")


def _from_array(name: str, a: Any, override: Optional[str], kind: str) -> _Tensor:
    if kind == "numpy":
        import numpy as np

        # As safetensors.numpy saves them: contiguous, little-endian bytes (copies where needed).
        if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and np.little_endian is False):
            a = a.astype(a.dtype.newbyteorder("<"))
        if not a.flags.c_contiguous:
            a = a.copy(order="C")  # (not ascontiguousarray, which makes 0-d arrays 1-d)
        address, device = int(a.ctypes.data), None
    else:
        if not (a.flags.c_contiguous or a.size <= 1):
            raise ValueError(f"tensor {name!r} is not contiguous: pass cupy.ascontiguousarray(...) to save it")
        address, device = int(a.data.ptr), int(a.device.id)
    dtype = _dtype_name(name, _dtype_names("array"), a.dtype.name, override, a.dtype.itemsize)
    return _Tensor(name, dtype, tuple(int(d) for d in a.shape), address, a, device, kind)


def _from_other(name: str, obj: Any, override: Optional[str]) -> _Tensor:
    """Anything Ferry reads into: __cuda_array_interface__ producers, else buffer-protocol or DLPack host memory
    (through NumPy)."""
    import numpy as np

    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        try:
            array = np.asarray(memoryview(obj)) if not hasattr(obj, "__dlpack__") else np.from_dlpack(obj)
        except (TypeError, ValueError, RuntimeError, BufferError) as e:
            raise TypeError(f"tensor {name!r}: {type(obj).__name__} is not an array Ferry can save ({e})") from None
        return _from_array(name, array, override, "numpy")
    from ._buffers import acquire

    buf = acquire(obj, for_read=False)  # contiguity, device pointer and producer stream checked there
    typestr = str(cai["typestr"])
    if typestr[0] == ">":
        raise ValueError(f"tensor {name!r} is big-endian ({typestr}); safetensors holds little-endian data")
    try:
        have = np.dtype(typestr)
    except TypeError:
        raise ValueError(f"tensor {name!r} has the element type {typestr!r}, which safetensors cannot hold") from None
    dtype = _dtype_name(name, _dtype_names("array"), have.name, override, have.itemsize)
    return _Tensor(name, dtype, tuple(int(d) for d in cai["shape"]), int(buf.address), (obj, buf),
                   int(buf.device_id) if buf.device_type in (2, 13) else None, "other")


def _tensors(tensors: Any, dtypes: Optional[Mapping[str, str]]) -> List[_Tensor]:
    if not isinstance(tensors, Mapping):
        raise ValueError(f"Expected a dict of [str, tensor] but received {type(tensors).__name__}")
    dtypes = dict(dtypes or {})
    unknown = [n for n in dtypes if n not in tensors]
    if unknown:
        raise ValueError(f"dtypes names {unknown[0]!r}, which is not one of the tensors")
    out = []
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, not {type(name).__name__} ({name!r})")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"tensor name {name!r} is not valid Unicode text ({e.reason})") from None
        kind = _kind(value)
        override = dtypes.get(name)
        if kind == "torch":
            out.append(_from_torch(name, value, override))
        elif kind in ("numpy", "cupy"):
            out.append(_from_array(name, value, override, kind))
        else:
            out.append(_from_other(name, value, override))
    return out


def _metadata(metadata: Any) -> Optional[Dict[str, str]]:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict of str to str, not {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"metadata must map str to str, but {key!r} maps to {type(value).__name__} {value!r}"
                            if isinstance(key, str) else f"metadata keys must be str, not {type(key).__name__} ({key!r})")
    return dict(metadata)


def _synchronize(tensors: Iterable[_Tensor]) -> None:
    """Waits for the kernels queued on the current stream of each GPU a tensor lives on (they may still be
    writing it), as the reference's copy to the CPU on that stream would."""
    torch_devices = sorted({t.cuda_device for t in tensors if t.framework == "torch" and t.cuda_device is not None})
    cupy_devices = sorted({t.cuda_device for t in tensors if t.framework == "cupy" and t.cuda_device is not None})
    if torch_devices:
        import torch

        for d in torch_devices:
            torch.cuda.current_stream(d).synchronize()
    if cupy_devices:
        import cupy

        for d in cupy_devices:
            with cupy.cuda.Device(d):
                cupy.cuda.get_current_stream().synchronize()


def _prepare(tensors: Any, metadata: Any, dtypes: Optional[Mapping[str, str]], max_staging_bytes: Optional[Union[int, str]],
             durable: Any, settings: Dict[str, Any]) -> Tuple[List[_Tensor], "_ferry.SafetensorsSaveJob"]:
    specs = _tensors(tensors, dtypes)
    meta = _metadata(metadata)
    staging = 0 if max_staging_bytes is None else _parse_bytes("max_staging_bytes", max_staging_bytes)
    refuse_overlapping = not specs or any(t.framework != "numpy" for t in specs)
    _synchronize(specs)
    job = _ferry.SafetensorsSaveJob([t.row() for t in specs], meta, bool(durable),
                                    _overrides(settings, "unknown setting"), staging, refuse_overlapping)
    return specs, job


def _parse_bytes(what: str, value: Union[int, str]) -> int:
    from ._config import parse_size

    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{what} must be an int or a size like '5GB', not {type(value).__name__}")
    return parse_size(value)


def _path(filename: PathLike) -> bytes:
    """Where a save goes, as the kernel gets it. A URL is refused (saves write local files; `ferry write` says
    the same), shown without its credentials; a NUL byte raises ``ValueError`` (it would cut the path short:
    ``"model\\0.bak"`` would replace ``model``)."""
    if isinstance(filename, str) and _ferry.is_remote_url(filename):
        raise invalid_argument(f"Could not save to {_args.display(filename)!r}: remote writes are not supported "
                               "(save to a local file, then copy it)")
    return _args.fs_path(filename)


class SaveResult:
    """What a save did. ``path`` (as given), ``report`` (a :class:`ferry.Report` of the writes), ``notes``, and
    ``stats``: ``file_bytes``, ``tensors``, ``device_bytes`` (copied from GPU memory), ``staging_bytes``,
    ``staging_pinned``, ``requests``, ``seconds``, ``snapshot_seconds`` (until no tensor was read any more),
    ``snapshot_wait_seconds`` (of which: waiting for writes to free staging), ``sync_seconds``,
    ``commit_seconds`` (rename and directory sync), ``gib_per_s``, ``replaced``, ``target``."""

    __slots__ = ("path", "stats", "report", "notes")

    def __init__(self, stats: Dict[str, Any]) -> None:
        from ._report import Report

        stats = dict(stats)
        self.report = Report._from_parts(stats.pop("report"))
        self.notes = list(stats.pop("notes"))
        stats["path"] = os.fsdecode(stats["path"])
        stats["target"] = os.fsdecode(stats["target"])
        stats["gib_per_s"] = stats["file_bytes"] / stats["seconds"] / (1 << 30) if stats["seconds"] > 0 else 0.0
        self.path = stats["path"]
        self.stats = stats

    def __repr__(self) -> str:
        s = self.stats
        return (f"<ferry.safetensors.SaveResult {self.path!r}: {s['tensors']} tensors, {s['file_bytes']} bytes in "
                f"{s['seconds']:.3f} s ({s['gib_per_s']:.2f} GiB/s), snapshot {s['snapshot_seconds']:.3f} s>")


class SaveHandle:
    """A save running in the background (``save_file(..., background=True)``).

    ``snapshot(timeout=None)`` returns once every tensor's bytes have been copied off the tensors (into
    staging memory or the file): from then on the tensors may change. ``result(timeout=None)`` returns the
    :class:`SaveResult` once the file is under its name (durable unless ``durable=False``), or raises the
    save's error (the target is then as it was). Both raise ``TimeoutError`` when ``timeout`` passes first, and
    a ``KeyboardInterrupt`` while they wait cancels the save. ``done()``, ``cancel()``, ``exception()``,
    ``bytes_written`` and ``file_bytes`` as their names say. Dropping the last reference waits for the save.
    """

    __slots__ = ("_impl", "path", "_result", "_error")

    def __init__(self, impl: "_ferry.SafetensorsSaveHandle", path: str) -> None:
        self._impl = impl
        self.path = path
        self._result: Optional[SaveResult] = None
        self._error: Optional[BaseException] = None

    def snapshot(self, timeout: Optional[float] = None) -> None:
        if not self._impl.snapshot(_args.timeout(timeout)):
            raise TimeoutError(f"the snapshot of {self.path!r} was not taken within {timeout} s")

    def result(self, timeout: Optional[float] = None) -> SaveResult:
        limit = _args.timeout(timeout)
        if self._result is None and self._error is None:
            try:
                stats = self._impl.result(limit)
            except (OSError, ValueError) as e:  # ferry's errors: keep them for exception() and later calls
                self._error = e
                raise
            if stats is None:
                raise TimeoutError(f"saving {self.path!r} did not end within {timeout} s")
            self._result = SaveResult(stats)
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        try:
            self.result(timeout)
        except TimeoutError:
            raise
        except (OSError, ValueError) as e:
            return e
        return None

    def done(self) -> bool:
        return bool(self._impl.done())

    def cancel(self) -> None:
        self._impl.cancel()

    @property
    def bytes_written(self) -> int:
        return int(self._impl.bytes_written)

    @property
    def file_bytes(self) -> int:
        return int(self._impl.file_bytes)

    def __repr__(self) -> str:
        state = "done" if self.done() else f"{self.bytes_written} of {self.file_bytes} bytes written"
        return f"<ferry.safetensors.SaveHandle {self.path!r}: {state}>"


def save_file(tensors: Mapping[str, Any], filename: PathLike, metadata: Optional[Mapping[str, str]] = None, *,
              durable: bool = True, background: bool = False, max_staging_bytes: Optional[Union[int, str]] = None,
              dtypes: Optional[Mapping[str, str]] = None, progress: Any = None,
              **settings: Any) -> Union[SaveResult, SaveHandle]:
    """``safetensors.torch.save_file`` (and ``safetensors.numpy.save_file``) through Ferry: the same file.

    ``tensors``: name -> PyTorch tensor, CuPy or NumPy array, or any array Ferry reads into (CUDA Array
    Interface, DLPack, buffer protocol), in GPU or host memory. ``metadata``: str -> str, written as
    ``__metadata__``. ``dtypes``: name -> safetensors dtype for arrays whose library lacks it (a raw ``uint16``
    array saved as ``"BF16"``: what :func:`ferry.safetensors.load` returns for CuPy and NumPy).

    ``durable`` (default True): ``fdatasync`` before the rename and ``fsync`` of the directory after it; False
    leaves the data to the page cache (faster; a crash of the machine may lose it). ``background``: return a
    :class:`SaveHandle` at once; the tensors must not change until ``handle.snapshot()`` returned.
    ``max_staging_bytes``: staging memory in use at once (None: 256 MiB in the foreground; in the background
    the whole file, at most a quarter of the machine's memory, so that the snapshot need not wait for the
    disk); pinned, and kept for the process, where a tensor is in GPU memory.

    ``progress``: as for :func:`ferry.safetensors.load`, the package's one policy: None (a bar on stderr for
    checkpoints of 256 MiB or more, when stderr is a terminal), True (a bar whenever stderr is a terminal: tqdm's
    where it is importable), False, or a callable ``(bytes_written, file_bytes)`` called about every 0.1 s
    (returning False cancels); foreground saves only (a background save is followed with
    ``handle.bytes_written``). Other keyword arguments are Ferry settings for the writes (``threads=8``,
    ``direct_io="off"``, ...; ``direct_io="auto"`` means O_DIRECT for durable saves and the page cache
    otherwise).

    Returns a :class:`SaveResult` (the reference returns None), or a :class:`SaveHandle` in the background.
    Raises ``ValueError``/``TypeError`` for tensors or metadata the reference refuses too (naming the tensor),
    ``PermissionError``, ``IsADirectoryError``, ``FileNotFoundError`` (a missing directory) and
    ``ferry.FerryError`` for destinations Ferry does not replace (devices, FIFOs), ``OSError`` with ``ENOSPC``
    and other I/O errors from the writes (the target is then as it was). In the background, errors found
    before any data moves are raised here and later ones by the handle.
    """
    specs, job = _prepare(tensors, metadata, dtypes, max_staging_bytes, durable, settings)
    path = _path(filename)
    if background:
        if progress not in (None, False):
            raise ValueError("progress is for foreground saves; poll handle.bytes_written instead")
        return SaveHandle(_ferry.safetensors_start_save(path, job, [t.keep for t in specs]), os.fsdecode(path))
    callback = _save_progress(progress, specs, f"saving {os.path.basename(os.fsdecode(path))}")
    with _exit_cleanly_on_sigterm():
        return SaveResult(_ferry.safetensors_save(path, job, callback))


@contextlib.contextmanager
def _exit_cleanly_on_sigterm() -> Iterator[None]:
    """A SIGTERM with its default action (a scheduler's preemption) kills the process at once, and a save's
    named temporary file (file systems without O_TMPFILE: NFS, CIFS, FUSE) stays behind until the next save
    into that directory removes it. During a foreground save on the main thread, a SIGTERM raises
    ``SystemExit(143)`` instead: the save stops, removes its temporary, and the process exits with the status
    the signal would have given. A program with a SIGTERM handler of its own keeps it (chained: untouched)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is terminate:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _save_progress(progress: Any, specs: Any, label: str) -> Any:
    """The package's one progress policy (ferry._progress.callback), for a save of `specs`' bytes."""
    total = sum(DTYPE_SIZES[t.dtype] * math.prod(t.shape) for t in specs)
    return _progress.callback(progress, total, label, automatic_from_bytes=_progress.CHECKPOINT_BAR_MIN_BYTES)


class ShardedSaveResult:
    """What :func:`save_sharded` did: ``files`` (shard paths, in order), ``index`` (the index's path, or None for
    one shard), ``total_size`` (bytes of tensor data), ``aliases`` ({name: name kept} for tensors that were the
    same memory as another and were saved once), ``removed`` (stale files removed), ``shards`` (a
    :class:`SaveResult` per shard), ``seconds``."""

    __slots__ = ("files", "index", "total_size", "aliases", "removed", "shards", "seconds")

    def __init__(self, d: Dict[str, Any]) -> None:
        self.files = [os.fsdecode(f) for f in d["files"]]
        self.index = os.fsdecode(d["index"]) if d["index"] is not None else None
        self.total_size = int(d["total_size"])
        self.aliases = dict(d["aliases"])
        self.removed = [os.fsdecode(f) for f in d["removed"]]
        self.shards = [SaveResult(s) for s in d["shards"]]
        self.seconds = float(d["seconds"])

    def __repr__(self) -> str:
        return (f"<ferry.safetensors.ShardedSaveResult {len(self.files)} file(s), {self.total_size} bytes in "
                f"{self.seconds:.3f} s, index {self.index!r}>")


def save_sharded(tensors: Mapping[str, Any], save_directory: PathLike, max_shard_size: Union[int, str] = "5GB",
                 metadata: Optional[Mapping[str, str]] = None, *, prefix: str = "model", remove_stale: bool = False,
                 durable: bool = True, max_staging_bytes: Optional[Union[int, str]] = None,
                 dtypes: Optional[Mapping[str, str]] = None, progress: Any = None,
                 **settings: Any) -> ShardedSaveResult:
    """Saves ``tensors`` into ``save_directory`` the way Hugging Face's ``save_pretrained`` lays a checkpoint out:
    ``model.safetensors`` when it fits in one shard, else ``model-00001-of-0000N.safetensors`` shards and
    ``model.safetensors.index.json`` (``{"metadata": {"total_size": ...}, "weight_map": {name: shard}}``),
    written last, so that a reader never finds an index naming an incomplete shard.

    Tensors go to shards in the dict's order; a shard is closed before the tensor that would take it past
    ``max_shard_size`` (an int, or "5GB" = 5 * 10**9, "2GiB" = 2 * 2**30), and a larger tensor gets a shard of
    its own (as ``huggingface_hub.split_torch_state_dict_into_shards``). Tensors that are the same memory
    (tied weights: same address, dtype and shape) are saved once, under the first name (``aliases`` says
    which); partly overlapping ones are refused. ``metadata`` goes into every shard's header.

    Files of an earlier save that this one would not replace (other shard counts, a single file beside an
    index) would mislead readers: they are refused (``FileExistsError``, before anything is written), or
    removed once the new index is in place with ``remove_stale=True``. The directory is created if missing.
    ``progress`` is the whole save's (every shard's tensor bytes). Other options as :func:`save_file`.
    """
    specs, job = _prepare(tensors, metadata, dtypes, max_staging_bytes, durable, settings)
    prefix = _args.text("prefix", prefix)
    directory = _path(save_directory)
    limit = _parse_bytes("max_shard_size", max_shard_size)
    callback = _save_progress(progress, specs, f"saving {os.path.basename(os.fsdecode(directory))}")
    with _exit_cleanly_on_sigterm():
        d = _ferry.safetensors_save_sharded(directory, job, limit, prefix, bool(remove_stale), callback)
    return ShardedSaveResult(d)
