"""Many files (or remote objects) as one dask array or bag, each shard read by Ferry inside its task.

::

    import dask, ferry.dask

    arr, reports = ferry.dask.read_array(paths, shard_shape=(1024, 4096), dtype="float32", with_reports=True)
    total, reports = dask.compute(arr.sum(), reports)      # one read per shard; reports come back alongside
    print(ferry.dask.summarize(reports))

Each shard is one file (a local path, or an ``http(s)://`` / ``s3://`` URL) holding ``shard_shape``
elements of ``dtype`` at ``offset`` (C order); the array is the shards stacked along the first axis
(``axis=0``), one chunk per shard. A task reads its shard with :func:`ferry.open`, files and URLs alike,
into memory of its own: a NumPy array, or with ``device="cuda"`` a CuPy array (the staged route, or
cuFile's for files where it goes direct). ``device="auto"`` (the default) picks CUDA where CuPy imports
and sees a GPU, else NumPy. ``settings`` are Ferry settings for every shard's ``ferry.open``
(``{"remote_connections": 4, "task_size": "1MiB"}``).

Reports: each task also returns what its read did, a ``dict`` with the shard, ``bytes``, ``seconds``,
``route`` (the routes its operations took, as in Ferry's route report: ``"host"``, ``"staged"``, ...),
the full route report (``"report"``), and where it ran (``"host"``, ``"pid"``). With
``with_reports=True`` :func:`read_array` returns them as a dask ``Delayed`` list that shares the array's
read tasks, so computing both together reads every shard once. :func:`read_bag` gives a bag of
``(array, report)`` per shard instead.

Secrets stay out of the task graph, which dask.distributed logs when a task fails: a shard's URL travels
in a wrapper whose repr is its display form (no user name, password or query), and credentials are not
accepted at all: each worker finds its own (AWS_* variables, ~/.aws), as it would for any AWS tool.

Works with any dask scheduler, including ``dask.distributed`` clusters of processes: the tasks import
Ferry on the workers. Needs ``dask`` (``python3-dask``); ``dask.distributed`` only to run on a cluster.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from typing import Any, Dict, Optional, Sequence, Tuple, Union

__all__ = ["read_array", "read_bag", "read_shard", "summarize", "Shard"]

PathLike = Union[str, "os.PathLike[str]"]


def _cupy_usable() -> bool:
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:  # noqa: BLE001 - any failure means: no usable CuPy here
        return False


def _resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if _cupy_usable() else "cpu"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', not {device!r}")
    return device


class Shard:
    """A shard's location as tasks carry it: ``target`` is opened, ``shown`` (the display form of a URL,
    without credentials or query) is what every repr, log line, error and report shows."""

    __slots__ = ("target", "shown")

    def __init__(self, path: PathLike) -> None:
        from . import remote

        self.target = os.fspath(path)
        self.shown = remote.display_url(self.target) if isinstance(self.target, str) else self.target

    def __repr__(self) -> str:
        return repr(self.shown)

    def __reduce__(self) -> Any:
        return (Shard, (self.target,))

    def __dask_tokenize__(self) -> Any:
        return ("ferry.dask.Shard", hashlib.sha256(os.fsencode(self.target)).hexdigest())


def _settings(settings: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    given = dict(settings or {})
    secret = [k for k in given if k in ("credentials", "access_key_id", "secret_access_key", "session_token")]
    if secret:
        raise TypeError(f"ferry.dask does not take {secret[0]!r}: secrets would travel in the task graph (and into "
                        "dask.distributed's logs); let each worker find its credentials (AWS_ACCESS_KEY_ID, ~/.aws)")
    return given


def read_shard(
    path: Union[PathLike, Shard],
    shard_shape: Sequence[int],
    dtype: Any,
    offset: int = 0,
    device: str = "auto",
    settings: Optional[Dict[str, Any]] = None,
) -> Tuple[Any, Dict[str, Any]]:
    """Reads one shard with :func:`ferry.open`: ``(array, report)``. What each task of :func:`read_array` runs."""
    import numpy

    import ferry

    shard = path if isinstance(path, Shard) else Shard(path)
    dt = numpy.dtype(dtype)
    shape = tuple(int(s) for s in shard_shape)
    nbytes = int(numpy.prod(shape, dtype=numpy.int64)) * dt.itemsize
    device = _resolve_device(device)
    start = time.perf_counter()
    if device == "cuda":
        import cupy

        data: Any = cupy.empty(nbytes, dtype=cupy.uint8)
    else:
        data = numpy.empty(nbytes, dtype=numpy.uint8)
    with ferry.open(shard.target, **_settings(settings)) as f:
        fut = f.pread(data, offset=offset, size=nbytes)
        got = fut.result()
        full = dict(fut.report)
    used = full.get("routes", {})
    route = "+".join(sorted(r for r, v in used.items() if v.get("ops", 0))) or "none"
    seconds = time.perf_counter() - start
    if got != nbytes:
        raise EOFError(f"shard {shard.shown!r} holds {got} bytes from offset {offset}, {nbytes} needed for {shape} of {dt}")
    report = {
        "shard": shard.shown,
        "bytes": got,
        "seconds": seconds,
        "route": route,
        "device": device,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "report": full,
    }
    return data.view(dt).reshape(shape), report


def _first(pair: Tuple[Any, Dict[str, Any]]) -> Any:
    return pair[0]


def _second(pair: Tuple[Any, Dict[str, Any]]) -> Dict[str, Any]:
    return pair[1]


def read_array(
    paths: Sequence[PathLike],
    shard_shape: Sequence[int],
    dtype: Any,
    *,
    offset: int = 0,
    device: str = "auto",
    with_reports: bool = False,
    settings: Optional[Dict[str, Any]] = None,
) -> Any:
    """A dask array of the shards stacked along axis 0: shape ``(len(paths) * shard_shape[0], *rest)``,
    one chunk per shard. With ``with_reports=True``: ``(array, reports)``, ``reports`` a ``Delayed``
    list of each shard's report, in the order of ``paths``."""
    import dask
    import dask.array as da
    import numpy

    if not paths:
        raise ValueError("read_array needs at least one path")
    shape = tuple(int(s) for s in shard_shape)
    if not shape:
        raise ValueError("shard_shape needs at least one dimension")
    dt = numpy.dtype(dtype)
    resolved = _resolve_device(device)
    meta: Any = numpy.empty((0,) * len(shape), dtype=dt)
    if resolved == "cuda":
        import cupy

        meta = cupy.empty((0,) * len(shape), dtype=dt)
    given = _settings(settings)
    pairs = [dask.delayed(read_shard, pure=True)(Shard(p), shape, dt.str, offset, resolved, given) for p in paths]
    chunks = [da.from_delayed(dask.delayed(_first)(pair), shape=shape, dtype=dt, meta=meta) for pair in pairs]
    array = da.concatenate(chunks, axis=0) if len(chunks) > 1 else chunks[0]
    if not with_reports:
        return array
    reports = dask.delayed(list)([dask.delayed(_second)(pair) for pair in pairs])
    return array, reports


def read_bag(
    paths: Sequence[PathLike],
    shard_shape: Sequence[int],
    dtype: Any,
    *,
    offset: int = 0,
    device: str = "auto",
    settings: Optional[Dict[str, Any]] = None,
) -> Any:
    """A dask bag with one partition per shard, each holding one ``(array, report)`` pair."""
    import dask.bag as db
    import numpy

    dt = numpy.dtype(dtype)
    resolved = _resolve_device(device)
    shards = [Shard(p) for p in paths]
    bag = db.from_sequence(shards, npartitions=max(1, len(shards)))
    return bag.map(read_shard, tuple(shard_shape), dt.str, offset, resolved, _settings(settings))


def summarize(reports: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Totals of shard reports: shards, bytes, routes used (route -> shards), workers (host:pid -> shards),
    the slowest shard's seconds."""
    routes: Dict[str, int] = {}
    workers: Dict[str, int] = {}
    for r in reports:
        routes[r["route"]] = routes.get(r["route"], 0) + 1
        key = f"{r['host']}:{r['pid']}"
        workers[key] = workers.get(key, 0) + 1
    return {
        "shards": len(reports),
        "bytes": sum(r["bytes"] for r in reports),
        "routes": routes,
        "workers": workers,
        "slowest_seconds": max((r["seconds"] for r in reports), default=0.0),
    }
