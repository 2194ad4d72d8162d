"""HTTP(S) and S3 objects into host memory, with Ferry's parallel range reader (``ferry::remote``).

::

    import ferry.remote

    data = ferry.remote.read("s3://bucket/shard-000.bin")                 # a NumPy uint8 array
    with ferry.remote.open("https://host/data.bin", connections=16) as obj:
        buf = numpy.empty(obj.size, dtype=numpy.uint8)
        n = obj.read_into(buf, offset=0)                                  # bytes read
        print(obj.report())                                               # requests, retries, connections

URLs: ``http://``, ``https://`` and ``s3://bucket/key``. A read is split into parts of ``part_size`` bytes
fetched over ``connections`` parallel keep-alive connections, each byte written once, straight into the
destination. Every request after ``open`` carries ``If-Match`` with the ETag ``open`` saw, so an object
replaced during a read raises instead of mixing two versions.

Keyword options (each also an environment variable; see docs/remote.md): ``connections``
(FERRY_REMOTE_CONNECTIONS, default 8), ``part_size`` (FERRY_REMOTE_PART_SIZE, 8 MiB), ``max_retries``
(FERRY_REMOTE_MAX_RETRIES, 5), ``retry_delay_ms``, ``retry_max_delay_ms``, ``connect_timeout_ms``,
``stall_timeout_ms``, ``verify_tls``; for S3 ``region``, ``endpoint`` (FERRY_S3_ENDPOINT / AWS_ENDPOINT_URL),
``profile``, ``addressing`` (``"automatic"``, ``"path"``, ``"virtual_host"``), ``access_key_id``,
``secret_access_key``, ``session_token``, ``anonymous``. Credentials otherwise come from AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN or ~/.aws/credentials and ~/.aws/config.

Errors: ``FileNotFoundError`` (404), ``PermissionError`` (401/403, e.g. a wrong secret:
"SignatureDoesNotMatch"), :class:`ferry.UnavailableError` (retries exhausted), ``OSError`` subclasses
with a ``code`` of ``"failed_precondition"`` (the object changed during the read; a server without range
support asked for a read not at offset 0; any write). Messages name the URL without its query string or
credentials.

Host memory only for now: reading into GPU memory (and ``ferry.open("s3://...")``) comes when remote
objects plug into ``ferry.File``. A CuPy or torch CUDA destination is refused with a clear error.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

from . import _ferry
from ._errors import InvalidBufferError

__all__ = ["RemoteObject", "open", "read", "read_into", "is_remote_url", "display_url", "available"]


def available() -> bool:
    """True when this build of Ferry reads remote objects (it was built with libcurl and libcrypto)."""
    return _ferry.remote_unavailable_reason() == ""


def is_remote_url(path: Any) -> bool:
    """True for ``http://``, ``https://`` and ``s3://`` URLs."""
    return isinstance(path, str) and _ferry.is_remote_url(path)


def display_url(url: str) -> str:
    """``url`` as Ferry shows it: without user name, password, query string or fragment."""
    return _ferry.remote_display_url(url)


def _host_view(buffer: Any) -> memoryview:
    if hasattr(buffer, "__cuda_array_interface__"):
        raise InvalidBufferError(
            "ferry.remote reads into host memory only for now; read into a NumPy array and copy it to the GPU"
        )
    try:
        view = memoryview(buffer)
    except TypeError:
        raise TypeError(f"a writable bytes-like object or array is required, not {type(buffer).__name__!r}") from None
    if view.readonly:
        raise InvalidBufferError("cannot read into a read-only buffer")
    if not view.c_contiguous:
        raise InvalidBufferError("buffer is not contiguous")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _address(view: memoryview) -> int:
    import ctypes

    if view.nbytes == 0:
        return 0
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


class RemoteObject:
    """An object open for reading; see the module's documentation. Safe to read from many threads."""

    def __init__(self, url: str, mode: str = "r", **options: Any) -> None:
        if not isinstance(url, str):
            raise TypeError(f"url must be a str, not {type(url).__name__!r}")
        self._obj = _ferry.RemoteObject(url, options, mode)
        self._started = time.perf_counter()

    @property
    def size(self) -> int:
        """The object's size in bytes."""
        return self._obj.size

    @property
    def etag(self) -> str:
        """The ETag ``open`` saw (quotes included), or ``""``."""
        return self._obj.etag

    @property
    def ranges_supported(self) -> bool:
        return self._obj.ranges_supported

    @property
    def url(self) -> str:
        """The URL in display form (no credentials, no query)."""
        return self._obj.url

    def read_into(self, buffer: Any, offset: int = 0, size: Optional[int] = None) -> int:
        """Reads up to ``size`` bytes (default: the buffer's size) at ``offset`` into ``buffer``, a writable
        contiguous host buffer. Returns the bytes read: fewer only where the object ends first."""
        view = _host_view(buffer)
        if size is None:
            size = view.nbytes
        if size < 0 or offset < 0:
            raise ValueError("size and offset must not be negative")
        if size > view.nbytes:
            raise InvalidBufferError(f"buffer too small: {size} bytes requested, the buffer holds {view.nbytes}")
        return self._obj.read_into(_address(view), size, offset)

    def read(self, size: Optional[int] = None, offset: int = 0) -> Any:
        """Reads up to ``size`` bytes at ``offset`` (default: to the end) into a new NumPy ``uint8`` array."""
        import numpy

        available_bytes = max(0, self.size - offset)
        size = available_bytes if size is None else min(size, available_bytes)
        out = numpy.empty(size, dtype=numpy.uint8)
        got = self.read_into(out, offset, size)
        return out[:got]

    def counters(self) -> Dict[str, Any]:
        """Bytes, requests, retries, connections opened, read calls and seconds spent reading, since open."""
        return self._obj.counters()

    def report(self) -> Dict[str, Any]:
        """What the reads of this object did, as a dict: route ``"remote_host"``, the URL, size, ETag,
        the counters, and the throughput of the time spent in reads."""
        c = self.counters()
        seconds = c["read_seconds"]
        return {
            "route": "remote_host",
            "url": self.url,
            "size": self.size,
            "etag": self.etag,
            "ranges_supported": self.ranges_supported,
            "connections_setting": self._obj.connections,
            **c,
            "gib_per_s": (c["bytes"] / seconds / 2**30) if seconds > 0 else 0.0,
        }

    def close(self) -> None:
        """Nothing to release but the connections, which go with the object; kept for symmetry with files."""

    def __enter__(self) -> "RemoteObject":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ferry.remote.RemoteObject {self.url!r} size={self.size}>"


def open(url: str, mode: str = "r", **options: Any) -> RemoteObject:  # noqa: A001 - mirrors ferry.open
    """Opens ``url`` for reading. ``mode`` must be ``"r"``: writes raise (``"remote writes are not
    supported yet"``)."""
    return RemoteObject(url, mode, **options)


def read(url: str, size: Optional[int] = None, offset: int = 0, **options: Any) -> Any:
    """Reads ``url`` (or ``size`` bytes of it at ``offset``) into a new NumPy ``uint8`` array."""
    return RemoteObject(url, **options).read(size, offset)


def read_into(url: str, buffer: Any, offset: int = 0, **options: Any) -> int:
    """Reads ``url`` at ``offset`` into ``buffer`` (as much as it holds); returns the bytes read."""
    return RemoteObject(url, **options).read_into(buffer, offset)
