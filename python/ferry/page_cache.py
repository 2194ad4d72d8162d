"""What the kernel's page cache holds of a file, and dropping it (``ferry::page_cache`` in C++).

    >>> import ferry
    >>> r = ferry.page_cache.residency("/data/shard.bin")
    >>> r.cached_bytes, r.range_bytes, r.fraction, r.method
    (1073741824, 1073741824, 1.0, 'cachestat')
    >>> ferry.page_cache.evict("/data/shard.bin").cached_bytes     # cold again, without root
    0

Counts are in pages: a page partly inside the range counts whole, so ``cached_bytes`` is exact for ranges
that start and end on page boundaries (or at the end of the file). Nothing is read and no readahead is
started: ``cachestat(2)`` (Linux 6.5 and later), else ``mincore(2)`` on a mapping of the range.
"""

from __future__ import annotations

import os
from typing import NamedTuple, Optional, Union

from . import _args, _ferry
from ._args import MAX_U64

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

__all__ = ["Residency", "residency", "cached_bytes", "evict"]


class Residency(NamedTuple):
    cached_bytes: int  #: bytes of the range in the page cache
    range_bytes: int   #: bytes of the range inside the file (cut at the end of the file)
    page_bytes: int    #: the unit of the count
    method: str        #: "cachestat" or "mincore"

    @property
    def fraction(self) -> float:
        """cached_bytes / range_bytes; 1.0 for an empty range."""
        return 1.0 if self.range_bytes == 0 else self.cached_bytes / self.range_bytes


def residency(path: PathLike, offset: int = 0, length: Optional[int] = None) -> Residency:
    """How much of ``length`` bytes (default: to the end of the file) at ``offset`` of ``path`` is in the page
    cache. A range past the end of the file is empty. Raises ``FileNotFoundError``/``PermissionError``
    (``OSError``), :class:`ferry.InvalidArgumentError` for a directory, FIFO or other file that cannot be
    asked; ``offset``/``length`` are checked as :meth:`ferry.File.pread` checks them."""
    at = _args.offset(offset)
    n = MAX_U64 if length is None else _args.size(length, MAX_U64)
    return Residency(*_ferry.page_cache_residency(_args.fs_path(path), at, n))


def cached_bytes(path: PathLike, offset: int = 0, length: Optional[int] = None) -> int:
    """``residency(path, offset, length).cached_bytes``."""
    return residency(path, offset, length).cached_bytes


def evict(path: PathLike, write_back: bool = True) -> Residency:
    """Asks the kernel to drop ``path``'s pages from the page cache (``posix_fadvise(POSIX_FADV_DONTNEED)``
    on the whole file) and returns what is still cached. Dirty pages (written, not yet on the device)
    cannot be dropped: with ``write_back`` (the default) the file is ``fdatasync``-ed first so that they
    can be. Pages mapped or locked by a process may stay, and pages read meanwhile come back: check the
    result when it matters. Needs read permission only (no root, unlike ``drop_caches``)."""
    return Residency(*_ferry.page_cache_evict(_args.fs_path(path), bool(write_back)))
