"""A transfer slow enough, on any machine, to be caught in the middle (imported by tests and their child
processes; not a test module).

One task at a time, 4 KiB each (SLOW), over a large sparse file: every task is a system call, and with
O_DIRECT (an aligned buffer, a disk file system) a hole still costs the kernel several microseconds, so
SPARSE bytes take seconds while using no disk. The destination is gigabytes of address space made of one
megabyte of memory mapped over and over (aliased_buffer), so the test does not need the memory either.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import weakref
from pathlib import Path

SLOW = dict(threads=1, task_size="4KiB", direct_io="auto")
SLOW_WRITE = dict(SLOW, direct_io="on")  # writes take the page cache unless O_DIRECT is asked for
SPARSE = 4 << 30  # 1 Mi tasks of 4 KiB
HEAD = 1 << 20  # random bytes at the start of the sparse file; the rest is a hole

_MAP_FIXED = 0x10
_MAP_NORESERVE = 0x4000


def make_sparse(path: Path, size: int = SPARSE) -> bytes:
    """Writes HEAD random bytes, then makes the file `size` bytes long with a hole; returns the head."""
    head = os.urandom(HEAD)
    with open(path, "wb") as out:
        out.write(head)
        out.truncate(size)
    return head


def aliased_buffer(total: int = SPARSE, chunk: int = 1 << 20):
    """A writable, page-aligned buffer of `total` bytes whose pages are the same `chunk` bytes of one memfd,
    mapped over and over: reads into it succeed, and its contents are meaningless. Unmapped when the
    returned object (a ctypes array) is collected, which Ferry prevents while a request uses it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    failed = ctypes.c_void_p(-1).value
    base = libc.mmap(None, total, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
    if base in (None, failed):
        raise OSError(ctypes.get_errno(), "mmap of the address range failed")
    fd = os.memfd_create("ferry-test-alias")
    try:
        os.ftruncate(fd, chunk)
        for off in range(0, total, chunk):
            got = libc.mmap(base + off, chunk, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | _MAP_FIXED, fd, 0)
            if got != base + off:
                libc.munmap(base, total)
                raise OSError(ctypes.get_errno(), "mmap of an alias failed")
    finally:
        os.close(fd)
    buf = (ctypes.c_char * total).from_address(base)
    weakref.finalize(buf, libc.munmap, base, total)
    return buf
