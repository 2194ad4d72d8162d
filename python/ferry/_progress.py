"""Progress reporting for blocking reads and writes: a callable, a tqdm bar, or Ferry's own line."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Union

Progress = Union[None, bool, Callable[[int, int], Any]]
ProgressCallback = Callable[[int, int], Any]

#: How often a blocking call with progress wakes to report it (seconds).
INTERVAL_S = 0.1


class _TqdmBar:
    """Feeds a tqdm bar (bytes, binary units) from (done, total) calls; closes it at the end."""

    def __init__(self, tqdm: Any, total: int, label: str) -> None:
        self.bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label, leave=False)
        self.last = 0

    def __call__(self, done: int, total: int) -> None:
        if done > self.last:
            self.bar.update(done - self.last)
            self.last = done
        if done >= total:
            self.bar.close()


def callback(progress: Progress, total: int, label: str) -> Optional[ProgressCallback]:
    """What ``progress=`` asks for: None/False nothing; a callable itself; True a tqdm bar when tqdm is
    importable, else Ferry's one-line bar on stderr (shown on a terminal only)."""
    if progress is None or progress is False:
        return None
    if callable(progress):
        return progress
    if progress is not True:
        raise TypeError(f"progress must be None, a bool or a callable (done, total), not {type(progress).__name__!r}")
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        return _TqdmBar(tqdm, total, label)
    from .safetensors import _ProgressBar  # the bar ferry.safetensors shows

    isatty = getattr(sys.stderr, "isatty", None)
    return _ProgressBar(label) if isatty and isatty() else None


def wait_with_progress(impl: Any, report: ProgressCallback, total: int) -> None:
    """Waits for the extension future ``impl``, calling ``report(done, total)`` every INTERVAL_S and once at
    the end (with the final count). An exception from ``report`` cancels the request (waiting for its
    running tasks) and propagates; so does Ctrl-C, as in every wait."""
    try:
        while not impl.wait(INTERVAL_S):
            report(int(impl.bytes_done()), total)
        report(int(impl.bytes_done()), total)
    except BaseException:
        impl.cancel(True)
        raise
