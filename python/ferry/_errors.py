"""Ferry's exceptions, and how a C++ ``ferry::Status`` becomes one of them.

Failures that have an operating-system meaning are raised as ``OSError(errno, message, filename)``, so
Python itself picks ``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError``, ... and ``errno``
and ``filename`` are set. Failures of Ferry's own contracts raise :class:`FerryError` (an ``OSError``
too, like ``io.UnsupportedOperation``) or one of its subclasses. Every exception raised from a Status has
a ``code`` attribute with the C++ error code's name (``"not_found"``, ``"io_error"``, ...), and its text is
the C++ message ("Could not read 4194304 bytes at offset 8388608 from ...: Input/output error (EIO)").

A request stopped by :meth:`ferry.Future.cancel` (or by a Ctrl-C while Python waited for it) raises
:class:`CancelledError`, which is both a :class:`FerryError` and a ``concurrent.futures.CancelledError``.

Buffers that cannot be used (read-only for a read, too small, not contiguous, on a device Ferry cannot
reach) raise :class:`InvalidBufferError`, a ``ValueError``, before any I/O starts.
"""

from __future__ import annotations

import concurrent.futures as _futures
import errno as _errno
from typing import Optional

__all__ = [
    "FerryError",
    "InvalidArgumentError",
    "UnavailableError",
    "CancelledError",
    "InvalidBufferError",
    "status_error",
    "invalid_argument",
]


class FerryError(OSError):
    """A Ferry operation failed for a reason of Ferry's own (a closed file, a policy that cannot be met).

    ``code`` is the C++ error code's name; ``errno`` and ``filename`` are set where the failure has them.
    """

    code: str = "unknown"

    def __str__(self) -> str:
        # OSError formats "[Errno None] None: 'path'" once a filename is set without an errno: show the
        # message (which names the file already) instead.
        if self.errno is None and self.args:
            return str(self.args[0])
        return super().__str__()


class InvalidArgumentError(FerryError, ValueError):
    """An argument Ferry rejected: a bad open mode, an unknown setting, a value that does not parse."""

    code = "invalid_argument"


class UnavailableError(FerryError):
    """What was asked for cannot be done on this machine (for example ``require="gds"`` without GDS)."""

    code = "unavailable"


class CancelledError(FerryError, _futures.CancelledError):
    """The request was stopped before it completed: by :meth:`ferry.Future.cancel`, by a Ctrl-C (or another
    signal handler's exception) while Python waited for it, or by a Ctrl-C during :meth:`ferry.File.close`.

    A :class:`FerryError` (code ``"cancelled"``) and a ``concurrent.futures.CancelledError``, so code written
    for either catches it. Bytes the request had moved stay moved; a cancelled read leaves the buffer's
    contents unspecified.
    """

    code = "cancelled"


class InvalidBufferError(ValueError):
    """The buffer cannot take part in this I/O: read-only for a read, too small, not contiguous, or on a
    device Ferry cannot reach. Raised before any I/O starts."""


# Codes whose meaning is an errno, for statuses that carry none: they still become the matching OSError
# subclass (FileNotFoundError, ...).
_DEFAULT_ERRNO = {
    "not_found": _errno.ENOENT,
    "already_exists": _errno.EEXIST,
    "permission_denied": _errno.EACCES,
    "is_a_directory": _errno.EISDIR,
    "no_space": _errno.ENOSPC,
}

# Codes that never become a plain OSError, even with an errno.
_OWN_CLASS = {
    "invalid_argument": InvalidArgumentError,
    "unavailable": UnavailableError,
    "failed_precondition": FerryError,
    "cancelled": CancelledError,
    "internal": FerryError,
}


def status_error(code: str, message: str, sys_errno: int, path: Optional[str]) -> BaseException:
    """Returns (does not raise) the exception for a non-OK Status with these fields.

    Called by the extension; the mapping is:

    * ``invalid_argument`` -> :class:`InvalidArgumentError` (also a ``ValueError``);
    * ``unavailable`` -> :class:`UnavailableError`; ``cancelled`` -> :class:`CancelledError`;
      ``failed_precondition``, ``internal`` -> :class:`FerryError`;
    * anything else with an errno (or with a code that implies one) -> ``OSError(errno, message,
      filename)``, which Python turns into ``FileNotFoundError``, ``PermissionError``, ...;
    * anything else -> :class:`FerryError`.
    """
    own = _OWN_CLASS.get(code)
    eno = sys_errno or _DEFAULT_ERRNO.get(code, 0)
    exc: OSError
    if own is None and eno:
        exc = OSError(eno, message, path) if path else OSError(eno, message)
    else:
        cls = own or FerryError
        if eno:
            exc = cls(eno, message, path) if path else cls(eno, message)
        else:
            exc = cls(message)
            exc.filename = path
    exc.code = code  # type: ignore[attr-defined]
    return exc


def invalid_argument(message: str, path: Optional[str] = None) -> InvalidArgumentError:
    """The error for an argument value Ferry refuses before any I/O: an :class:`InvalidArgumentError` with
    ``errno`` EINVAL, so it is caught as the ``ValueError`` io raises and as the ``OSError(EINVAL)`` os.pread
    raises for the same mistake."""
    exc = InvalidArgumentError(_errno.EINVAL, message, path) if path else InvalidArgumentError(_errno.EINVAL, message)
    return exc


for _cls in (FerryError, InvalidArgumentError, UnavailableError, CancelledError, InvalidBufferError):
    _cls.__module__ = "ferry"  # shown as ferry.FerryError in tracebacks, where users meet them
