"""Ferry: read files into GPU or host memory at the speed the machine allows, and see the route taken.

Quick start::

    import cupy, ferry

    with ferry.open("/data/shard.bin") as f:
        dst = cupy.empty(f.size(), dtype=cupy.uint8)
        n = f.read(dst)                 # blocking, at the file position; the GIL is released
        print(f.last_report)            # routes and reasons of that read
    print(ferry.stats())                # everything this process moved through Ferry

Buffers may be anything with ``__cuda_array_interface__`` (CuPy, Numba, PyTorch CUDA tensors), a DLPack
producer (``__dlpack__``), or the buffer protocol (NumPy, bytearray, memoryview, mmap). Settings live in
:data:`ferry.config` (``ferry.config.compat_mode = "on"``, ``with ferry.config.override(...)``) and may be
overridden per file: ``ferry.open(path, task_size="1MiB")``. See python/README.md for a guided tour.

Errors: OS failures are ``OSError`` subclasses with ``errno`` and ``filename`` (``FileNotFoundError``,
``PermissionError``, ...); Ferry's own are :class:`FerryError`; unusable buffers raise
:class:`InvalidBufferError` (a ``ValueError``) before any I/O. Every exception from the C++ side has a
``code`` attribute (``"not_found"``, ``"io_error"``, ...). Arguments are checked as the standard library
checks them (``TypeError``, ``OverflowError``, ``ValueError``; see python/README.md).

Ctrl-C: every wait (``read()``, ``write()``, ``Future.result()``, ``close()``, ...) runs signal handlers
while it waits. A ``KeyboardInterrupt`` cancels the request waited for, waits for its running tasks to stop
(one ``task_size`` each) and propagates; :meth:`Future.cancel` stops a request explicitly, and its
``result()`` then raises :class:`CancelledError`.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from . import _args, _ferry
from ._config import Setting, SettingValue, _overrides, config, format_size, parse_size
from ._errors import CancelledError, FerryError, InvalidArgumentError, InvalidBufferError, UnavailableError
from ._errors import invalid_argument as _errors_invalid_argument
from ._file import File, Future, PathLike, open
from ._report import ROUTES, Report, reset_stats, stats

__version__ = "0.1.0"

__all__ = [
    "open",
    "File",
    "Future",
    "Report",
    "config",
    "Setting",
    "stats",
    "reset_stats",
    "doctor",
    "warm_up",
    "pinned_memory",
    "parse_size",
    "format_size",
    "FerryError",
    "InvalidArgumentError",
    "UnavailableError",
    "CancelledError",
    "InvalidBufferError",
    "ROUTES",
]

for _public in (File, Future, Report, Setting):
    _public.__module__ = "ferry"  # shown as ferry.File (and so on), the names users know them by
del _public


# ----------------------------------------------------------------------------------------------- doctor


def doctor(path: Optional[PathLike] = None, *, device: int = 0, probe: bool = False) -> Dict[str, Any]:
    """Checks the platform (CUDA, cuFile, nvidia-fs, the file system of ``path``) and predicts the route
    a read of ``path`` into GPU ``device`` would take; with ``probe=True`` a small real read proves it.
    Returns the doctor's JSON report (schema ``ferry.doctor/1``, see docs/doctor.md) as a dict; its
    ``exit_status`` is what ``ferry doctor`` would exit with.

    ``path`` is checked as :func:`open` checks it; ``device`` is an int from 0 (``TypeError``,
    ``ValueError``, ``OverflowError`` otherwise); ``probe`` is taken for its truth value."""
    p = _args.fs_path(path) if path is not None else b""
    return dict(json.loads(_ferry.doctor_json(p, _device_ordinal(device), bool(probe))))


def _device_ordinal(device: int) -> int:
    dev = _args.integer("device", device)
    if dev > 2**31 - 1:
        raise OverflowError(f"device {dev} does not fit in a C int")
    if dev < 0:
        raise _errors_invalid_argument(f"device must not be negative, got {dev}")
    return dev


def warm_up(device: int = 0, **settings: SettingValue) -> None:
    """Does now what a process's first read into GPU ``device`` through the staged route would do inside
    it: starts Ferry's workers and pins a staging kit for each of them (``threads`` kits of
    ``bounce_buffers_per_thread`` x ``bounce_buffer_size``), so that the first read pins nothing (the 16
    default kits take about 35 ms on an H200 machine). It releases the GIL: call it on a thread of its own
    while the process does other start-up work, as :func:`ferry.torch.meta_parameters` does while a model
    is built; a read that starts meanwhile takes each kit as it is made. Kits that exist already count, so a
    second call costs nothing. ``settings`` override :data:`ferry.config` as for :func:`open`.

    Raises :class:`UnavailableError` without a usable CUDA driver or when pinned memory runs out."""
    _ferry.warm_up(_device_ordinal(device), _overrides(settings, "ferry.warm_up() got an unknown setting"))


def pinned_memory() -> Dict[str, Any]:
    """The pinned host memory Ferry's staging holds (bounce buffers, stream-ordered slots, save windows),
    against :data:`ferry.config`'s ``pinned_budget``: ``budget``, ``pinned_bytes`` (now, idle or in use),
    ``peak_bytes`` (the most at once since the process started), ``waits`` (times work waited for room) and
    ``waited_seconds`` (how long callers waited; a pool worker's waits show in its requests' reports)."""
    return dict(_ferry.pinned_memory())


# ferry.safetensors imports nothing beyond the extension and the standard library (torch and CuPy only
# when asked for), so it is loaded with the package.
from . import page_cache, safetensors  # noqa: E402
