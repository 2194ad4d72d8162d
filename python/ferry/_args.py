"""Argument checks for every public entry point, raising what the standard library raises for the same
mistake, so that code written for Python's own files handles Ferry's the same way:

* a wrong type is ``TypeError`` (``os.pread(fd, 1, 1.5)``, ``open(3.0)``);
* a value out of a C type's range is ``OverflowError`` (``os.pread(fd, 1, 2**63)``);
* any other bad value is ``ValueError``: :class:`ferry.InvalidArgumentError` with ``errno`` EINVAL for
  offsets and sizes, which is also the ``OSError(EINVAL)`` that ``os.pread`` raises for a negative offset;
  ``ValueError("embedded null byte")`` for paths, as ``open()`` says.

One deliberate difference: the standard library takes ``True`` and ``False`` as the integers 1 and 0
(``os.pread(fd, 1, True)`` reads at offset 1). Ferry refuses them with ``TypeError``, as NumPy refuses
booleans as indices: a bool where a byte count belongs is a mistake. tests/test_arguments.py holds the
comparison, case by case.
"""

from __future__ import annotations

import math
import numbers
import operator
import os
from typing import Any, Optional

from ._errors import InvalidBufferError, invalid_argument

#: The largest file offset (off_t): no byte of a request may lie past it.
MAX_OFFSET = (1 << 63) - 1
_MIN_OFFSET = -(1 << 63)
MAX_U64 = (1 << 64) - 1


def _type_name(value: Any) -> str:
    return type(value).__name__


def is_bool(value: Any) -> bool:
    """True for ``bool`` and for array booleans (``numpy.True_``), which ``__index__`` would turn into 0/1."""
    if isinstance(value, bool):
        return True
    return getattr(getattr(value, "dtype", None), "kind", None) == "b"


def integer(name: str, value: Any) -> int:
    """``value`` as an int: ints and objects with ``__index__`` (NumPy integers) pass; bools, floats,
    strings and everything else raise ``TypeError``, as ``os.pread`` does (bools: see the module doc)."""
    if is_bool(value):
        raise TypeError(f"{name} must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {_type_name(value)!r}") from None


def offset(value: Any, path: Optional[str] = None) -> int:
    """A file offset: 0 <= offset <= 2**63 - 1. Past what off_t holds: ``OverflowError`` (as ``os.pread``);
    negative: :class:`InvalidArgumentError` (EINVAL, as ``os.pread``; a ``ValueError``, as ``io``'s seek)."""
    n = integer("offset", value)
    if n > MAX_OFFSET or n < _MIN_OFFSET:
        raise OverflowError(f"offset {n} does not fit in a file offset (-2**63 to 2**63 - 1)")
    if n < 0:
        raise invalid_argument(f"offset must not be negative, got {n}", path)
    return n


def size(value: Any, capacity: int, path: Optional[str] = None) -> int:
    """A request's size in bytes: ``None`` means ``capacity`` (the whole buffer). Wrong types raise
    ``TypeError``; sizes past 2**63 - 1 ``OverflowError`` (as ``os.pread``'s ssize_t); negative ones
    :class:`InvalidArgumentError`; more than the buffer holds :class:`InvalidBufferError`."""
    if value is None:
        return int(capacity)
    n = integer("size", value)
    if n > MAX_OFFSET or n < _MIN_OFFSET:
        raise OverflowError(f"size {n} does not fit in a byte count (at most 2**63 - 1)")
    if n < 0:
        raise invalid_argument(f"size must not be negative, got {n}", path)
    if n > capacity:
        raise InvalidBufferError(f"buffer too small: {n} bytes requested, the buffer holds {capacity}")
    return n


def span(op: str, nbytes: int, at: int, path: Optional[str] = None) -> None:
    """Refuses a range that ends past the largest file offset, as the C++ API does (and the kernel, for
    ``os.pread``: ``OSError(EINVAL)``), but when the call is made rather than from ``result()``."""
    if nbytes > MAX_OFFSET - at:
        raise invalid_argument(
            f"Could not {op} {nbytes} bytes at offset {at}: the range ends past the largest file offset "
            f"({MAX_OFFSET})",
            path,
        )


def read_length(value: Any) -> int:
    """``read(n)``'s ``n``: -1 or ``None`` for "to the end"; other negative values raise ``ValueError``, as
    ``open(p, "rb").read(-2)`` does."""
    if value is None:
        return -1
    n = integer("read length", value)
    if n > MAX_OFFSET:
        raise OverflowError(f"read length {n} does not fit in a byte count (at most 2**63 - 1)")
    if n < -1:
        raise invalid_argument(f"read length must be non-negative or -1, got {n}")
    return n


def timeout(value: Any) -> Optional[float]:
    """A wait's timeout in seconds, as ``concurrent.futures`` takes it: ``None`` or infinity wait for ever,
    zero and negative values do not wait. Not a number: ``TypeError``; NaN: ``ValueError`` (as
    ``time.sleep`` and ``Lock.acquire`` say)."""
    if value is None:
        return None
    if is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"timeout must be a number of seconds or None, not {_type_name(value)!r}")
    seconds = float(value)  # OverflowError for ints beyond a float, as time.sleep
    if math.isnan(seconds):
        raise ValueError("timeout must not be NaN")
    if seconds == math.inf:
        return None
    return max(seconds, 0.0)


def fs_path(value: Any) -> bytes:
    """A path as the bytes the kernel gets: ``str``, ``bytes`` or ``os.PathLike`` (whose ``__fspath__``
    must return one of those), as ``open()`` takes it; anything else (file descriptors too) raises
    ``TypeError``; a NUL byte raises ``ValueError("embedded null byte")``. An empty path is passed on and
    fails as ``open("")`` does (``FileNotFoundError``)."""
    if isinstance(value, int):  # io.open takes descriptors; Ferry opens paths only (os.open's rule)
        raise TypeError(f"path should be str, bytes or os.PathLike, not {_type_name(value)} "
                        "(Ferry opens paths, not file descriptors)")
    raw = os.fsencode(os.fspath(value))
    if b"\0" in raw:
        raise ValueError("embedded null byte")
    return raw


def display(value: Any) -> str:
    """A path or URL as every message and label shows it: a URL without its user name, password, query string
    or fragment (where credentials and signatures travel), a path as ``os.fsdecode`` gives it. The one helper
    for labels made from a caller's checkpoint, file or save argument."""
    try:
        shown = value if isinstance(value, str) else os.fsdecode(os.fspath(value))
    except TypeError:
        return repr(value)
    from . import _ferry

    try:
        return _ferry.remote_display_url(shown) if _ferry.is_remote_url(shown) else shown
    except TypeError:  # a path that is not UTF-8 (surrogate escapes): no URL either
        return shown


def text(name: str, value: Any) -> str:
    """A str argument without NUL characters (open modes, setting values)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_type_name(value)}")
    if "\0" in value:
        raise ValueError(f"{name}: embedded null character")
    return value
