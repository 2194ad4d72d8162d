"""Many files (or remote objects) as one dask array or bag, each shard read by Ferry inside its task.

::

    import dask, ferry.dask

    arr, reports = ferry.dask.read_array(paths, shard_shape=(1024, 4096), dtype="float32", with_reports=True)
    total, reports = dask.compute(arr.sum(), reports)      # one read per shard; reports come back alongside
    print(ferry.dask.summarize(reports))

Each shard is one file (a local path, or an ``http(s)://`` / ``s3://`` URL read with :mod:`ferry.remote`)
holding ``shard_shape`` elements of ``dtype`` at ``offset`` (C order); the array is the shards stacked
along the first axis (``axis=0``), one chunk per shard. A task reads its shard with Ferry into memory of
its own: a NumPy array, or with ``device="cuda"`` a CuPy array (local files only for now: Ferry's GPU
route; remote shards are read into host memory and copied). ``device="auto"`` (the default) picks CUDA
where CuPy imports and sees a GPU, else NumPy.

Reports: each task also returns what its read did, a ``dict`` with the shard, ``bytes``, ``seconds``,
``route`` (``"host"``, ``"staged"``, ... for files, as in Ferry's route report; ``"remote_host"`` for
URLs), the full route report (``"report"``), and where it ran (``"host"``, ``"pid"``). With
``with_reports=True`` :func:`read_array` returns them as a dask ``Delayed`` list that shares the array's
read tasks, so computing both together reads every shard once. :func:`read_bag` gives a bag of
``(array, report)`` per shard instead.

Works with any dask scheduler, including ``dask.distributed`` clusters of processes: the tasks import
Ferry on the workers. Needs ``dask`` (``python3-dask``); ``dask.distributed`` only to run on a cluster.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Dict, Optional, Sequence, Tuple, Union

__all__ = ["read_array", "read_bag", "read_shard", "summarize"]

PathLike = Union[str, "os.PathLike[str]"]


def _cupy_usable() -> bool:
    try:
        import cupy  # type: ignore[import-not-found]

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any failure means: no usable CuPy here
        return False


def _resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if _cupy_usable() else "cpu"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', not {device!r}")
    return device


def read_shard(
    path: PathLike,
    shard_shape: Sequence[int],
    dtype: Any,
    offset: int = 0,
    device: str = "auto",
    remote_options: Optional[Dict[str, Any]] = None,
) -> Tuple[Any, Dict[str, Any]]:
    """Reads one shard with Ferry: ``(array, report)``. What each task of :func:`read_array` runs."""
    import numpy

    from . import remote

    dt = numpy.dtype(dtype)
    shape = tuple(int(s) for s in shard_shape)
    nbytes = int(numpy.prod(shape, dtype=numpy.int64)) * dt.itemsize
    device = _resolve_device(device)
    start = time.perf_counter()
    name = os.fspath(path)
    if remote.is_remote_url(name):
        obj = remote.RemoteObject(name, **(remote_options or {}))
        host = numpy.empty(nbytes, dtype=numpy.uint8)
        got = obj.read_into(host, offset, nbytes)
        full = obj.report()
        route = "remote_host"
        data: Any = host
        if device == "cuda":
            import cupy  # type: ignore[import-not-found]

            data = cupy.asarray(host)
    else:
        import ferry

        if device == "cuda":
            import cupy  # type: ignore[import-not-found]

            data = cupy.empty(nbytes, dtype=cupy.uint8)
        else:
            data = numpy.empty(nbytes, dtype=numpy.uint8)
        with ferry.open(name) as f:
            fut = f.pread(data, offset, nbytes)
            got = fut.result()
            full = dict(fut.report)
        used = full.get("routes", {})
        route = "+".join(sorted(r for r, v in used.items() if v.get("ops", 0))) or "none"
    seconds = time.perf_counter() - start
    if got != nbytes:
        raise EOFError(f"shard {remote.display_url(name) if remote.is_remote_url(name) else name!r} holds "
                       f"{got} bytes from offset {offset}, {nbytes} needed for {shape} of {dt}")
    report = {
        "shard": remote.display_url(name) if remote.is_remote_url(name) else name,
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
    remote_options: Optional[Dict[str, Any]] = None,
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
        import cupy  # type: ignore[import-not-found]

        meta = cupy.empty((0,) * len(shape), dtype=dt)
    pairs = [
        dask.delayed(read_shard, pure=True)(os.fspath(p), shape, dt.str, offset, resolved, remote_options)
        for p in paths
    ]
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
    remote_options: Optional[Dict[str, Any]] = None,
) -> Any:
    """A dask bag with one partition per shard, each holding one ``(array, report)`` pair."""
    import dask.bag as db
    import numpy

    dt = numpy.dtype(dtype)
    resolved = _resolve_device(device)
    names = [os.fspath(p) for p in paths]
    bag = db.from_sequence(names, npartitions=max(1, len(names)))
    return bag.map(read_shard, tuple(shard_shape), dt.str, offset, resolved, remote_options)


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
