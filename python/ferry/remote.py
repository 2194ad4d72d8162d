"""HTTP(S) and S3 objects: a URL opens wherever a path does, with :func:`ferry.open`.

::

    import ferry, ferry.remote

    with ferry.open("s3://bucket/shard-000.bin", remote_connections=16) as f:   # any buffer, host or GPU
        n = f.pread(buf).result()
        print(f.report())                       # route, and the object's HTTP requests, retries, connections
    data = ferry.remote.read("https://host/data.bin")                          # a NumPy uint8 array

A read is split into tasks of ``task_size``; each task is one HTTP range request on a keep-alive
connection, ``remote_connections`` of them at once, written straight into the destination (GPU memory
through the staged route's pinned buffers). Every request after the open carries ``If-Match`` with the
object's ETag, so an object replaced during a read raises instead of mixing two versions. The settings
are the ``remote_*`` and ``s3_*`` rows of :data:`ferry.config` (docs/settings.md, docs/remote.md), given to
``ferry.open`` like any other. Credentials come from ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
``AWS_SESSION_TOKEN`` or the ~/.aws files, or from a :class:`Credentials` given to ``ferry.open``.

Errors: ``FileNotFoundError`` (404), ``PermissionError`` (401/403, e.g. a wrong secret:
"SignatureDoesNotMatch"), :class:`ferry.UnavailableError` (retries exhausted, a stalled or too slow
server), ``OSError`` subclasses with a ``code`` of ``"failed_precondition"`` (the object changed during the
read; a server without range support asked for a read not at offset 0; any write). Messages, reports and
exception attributes name the URL without its query string or credentials.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from . import _args, _ferry

__all__ = ["Credentials", "read", "is_remote_url", "display_url", "available"]


def available() -> bool:
    """True when this build of Ferry reads remote objects (it was built with libcurl and libcrypto)."""
    return _ferry.remote_unavailable_reason() == ""


def is_remote_url(path: Any) -> bool:
    """True for ``http://``, ``https://`` and ``s3://`` URLs."""
    return isinstance(path, str) and _ferry.is_remote_url(path)


def display_url(url: str) -> str:
    """``url`` as Ferry shows it: without user name, password, query string or fragment."""
    return _ferry.remote_display_url(_args.text("url", url))


class Credentials:
    """S3 credentials for :func:`ferry.open` (``credentials=``), used only to sign requests. Their repr
    shows the access key id and hides the rest; they cannot be pickled or copied into a dask task graph
    (each process finds its own credentials: AWS_* variables or ~/.aws)."""

    __slots__ = ("access_key_id", "_secret", "_token")

    def __init__(self, access_key_id: str, secret_access_key: str, session_token: str = "") -> None:
        self.access_key_id = _args.text("access_key_id", access_key_id)
        self._secret = _args.text("secret_access_key", secret_access_key)
        self._token = _args.text("session_token", session_token)

    def _triple(self) -> Tuple[str, str, str]:
        return (self.access_key_id, self._secret, self._token)

    def __repr__(self) -> str:
        token = ", session_token='***'" if self._token else ""
        return f"ferry.remote.Credentials(access_key_id={self.access_key_id!r}, secret_access_key='***'{token})"

    def __reduce__(self) -> Any:
        raise TypeError("ferry.remote.Credentials are not pickled, so that no secret travels in a task graph or a "
                        "file: let each process find its credentials (AWS_ACCESS_KEY_ID, ~/.aws)")

    def __copy__(self) -> "Credentials":
        return self

    def __deepcopy__(self, memo: Any) -> "Credentials":
        return self


def read(url: str, size: Optional[int] = None, offset: int = 0, **options: Any) -> Any:
    """Reads ``url`` (or ``size`` bytes of it at ``offset``) into a new NumPy ``uint8`` array, with
    :func:`ferry.open`'s keywords (settings, ``credentials``)."""
    import numpy

    import ferry

    with ferry.open(url, **options) as f:
        out = numpy.empty(max(0, min(f.size() - offset, size if size is not None else f.size())), numpy.uint8)
        return out[: f.pread(out, offset=offset).result()]
