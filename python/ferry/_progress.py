"""Progress, one policy for every call that takes ``progress=`` (File.read/readinto/write, ferry.safetensors' loads
and reads): a callable, a tqdm bar, or Ferry's own line."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional, Union

Progress = Union[None, bool, Callable[[int, int], Any]]
ProgressCallback = Callable[[int, int], Any]

#: How often a blocking call with progress wakes to report it (seconds).
INTERVAL_S = 0.1
#: Ferry's bar appears only once the work has run this long (seconds): quick work shows none.
BAR_DELAY_S = 0.5


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


def _on_a_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


#: Checkpoint loads and saves of at least this many bytes get a progress bar on a terminal (progress=None).
CHECKPOINT_BAR_MIN_BYTES = 256 << 20


def callback(progress: Progress, total: int, label: str, *,
             automatic_from_bytes: Optional[int] = None) -> Optional[ProgressCallback]:
    """What ``progress=`` asks for, the same for every call that takes it: a callable is called itself; False
    shows nothing; True a bar: tqdm's (``tqdm.auto``) when tqdm is importable, else Ferry's line on stderr
    when stderr is a terminal. None is automatic: Ferry's line on a terminal for work of at least
    ``automatic_from_bytes`` (calls that pass none, such as File.read, show nothing)."""
    if progress is None:
        if automatic_from_bytes is None or total < automatic_from_bytes or not _on_a_terminal():
            return None
        return Bar(label)
    if progress is False:
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
    return Bar(label) if _on_a_terminal() else None


def format_bytes(n: float) -> str:
    """512 MiB as "512.00 MiB", for the bar and short reprs."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.2f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.2f} TiB"


class Bar:
    """Ferry's bar: one line on stderr, rewritten in place, shown only after half a second."""

    def __init__(self, label: str, stream: Any = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        elapsed = time.monotonic() - self.start
        if not self.shown and (elapsed < BAR_DELAY_S or done >= total):
            return
        self.shown = True
        rate = done / elapsed if elapsed > 0 else 0.0
        pct = 100.0 * done / total if total else 100.0
        width = 24
        filled = int(width * done / total) if total else width
        line = (f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {format_bytes(done)} of "
                f"{format_bytes(total)} ({pct:3.0f}%) {format_bytes(rate)}/s")
        self.stream.write(line)
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


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
