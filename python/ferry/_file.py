"""Files and requests: ferry.open, ferry.File and ferry.Future."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import logging
import numbers
import os
import sys
import threading
import weakref
from concurrent.futures import _base as _cf
from typing import TYPE_CHECKING, Any, Callable, Dict, Generator, Iterator, List, NoReturn, Optional, Tuple, Union

from . import _args, _ferry, _progress
from ._buffers import acquire as _acquire
from ._config import SettingValue, _overrides, _setting_names, _value_from_text
from ._errors import CancelledError, InvalidBufferError
from ._errors import invalid_argument as _errors_invalid_argument
from ._report import Report

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


if TYPE_CHECKING:
    _FutureBase = concurrent.futures.Future[int]
else:
    _FutureBase = concurrent.futures.Future  # not subscriptable at run time before Python 3.9

_DONE_STATES = (_cf.CANCELLED_AND_NOTIFIED, _cf.FINISHED)
_conditions_made = threading.Lock()  # makes each Future's Condition once
_log = logging.getLogger("ferry")


class Future(_FutureBase):
    """The pending result of :meth:`File.pread` or :meth:`File.pwrite`: a ``concurrent.futures.Future``.

    ``result()`` waits and returns the bytes transferred (fewer than asked only when a read reached the
    end of the file), or raises the request's error. ``report`` is the request's route report. The
    buffer stays referenced until the request is done; dropping a Future waits for its request, so a
    buffer is never written after Python could free it. All waits release the GIL.

    It works wherever a ``concurrent.futures.Future`` does: ``concurrent.futures.wait``, ``as_completed``,
    ``add_done_callback``, ``asyncio.wrap_future``, and ``await future`` in asyncio code (cancelling the
    awaiting task cancels the request without blocking the event loop). A request runs from the moment it
    is made, so ``running()`` is True until it is done. Done-callbacks are called once, on the thread
    that first sees the request done: the caller of ``result()``, ``done()`` and the like, or Ferry's
    ``ferry-futures`` thread, which learns of completions from the engine for the futures that
    ``wait``/``as_completed``, a callback or an ``await`` wait for. A callback that raises is logged (as
    ``concurrent.futures`` logs it); one that blocks holds up the callbacks of other futures, and one that
    waits for another Ferry future through ``concurrent.futures`` there never returns, so keep them short
    (``asyncio.wrap_future``'s are). ``set_result`` and the other methods for executors raise
    ``RuntimeError``: the request sets the outcome.

    Cancellation: :meth:`cancel` stops the request (no task starts after it; running tasks finish) and
    ``result()`` then raises :class:`CancelledError` (a ``concurrent.futures.CancelledError``). Every wait
    in Ferry's own methods runs Python's signal handlers while it waits: a ``KeyboardInterrupt`` (Ctrl-C)
    or any other exception a handler raises cancels the request, waits for its running tasks to stop, and
    then propagates. ``concurrent.futures.wait`` and ``as_completed`` wait in the standard library's way:
    Ctrl-C interrupts the wait and leaves the requests running (cancel them, or leave a ``with
    ferry.open(...)`` block, which does).

    Timeouts are taken as ``concurrent.futures`` takes them: seconds as an int or a float, ``None`` or
    infinity for no limit, zero or less for no wait at all.
    """

    __slots__ = ("_impl", "_op", "_size", "_offset", "_token", "_lazy_condition", "_waiter_list")

    # concurrent.futures.Future's state, which its wait() and as_completed() read and change: _condition,
    # _state, _waiters (the properties below), _result, _exception, _done_callbacks.
    _state: str
    _result: Any
    _exception: Optional[BaseException]
    _done_callbacks: List[Callable[[Any], object]]

    def __init__(self, impl: "_ferry.Future", op: str, size: int, offset: int) -> None:
        # What concurrent.futures.Future.__init__ sets (Python 3.8 to 3.13; test_concurrent_futures checks it), less
        # the Condition, made when first needed: a small read's pread().result() does without one.
        self._lazy_condition: Optional[threading.Condition] = None
        self._state = _cf.RUNNING  # the request is under way from the start; _settle() ends it
        self._result = None
        self._exception = None
        self._waiter_list: List[Any] = []
        self._done_callbacks = []
        self._impl = impl
        self._op = op
        self._size = size
        self._offset = offset
        self._token: Optional[int] = None

    @property
    def _condition(self) -> threading.Condition:
        condition = self._lazy_condition
        if condition is None:
            with _conditions_made:
                condition = self._lazy_condition
                if condition is None:
                    condition = self._lazy_condition = threading.Condition()
        return condition

    # concurrent.futures.wait and as_completed add their waiters to `_waiters` and read `_state`: a waiter
    # added here also asks the engine to announce the request's completion (see _Watcher).
    @property
    def _waiters(self) -> "_Waiters":
        return _Waiters(self)

    def _watch(self, keep: bool) -> None:
        """Has the watcher settle this future when its request completes; ``keep``: hold it until then
        (callbacks must run even if the caller drops it). Call with ``_condition`` held."""
        if self._token is None:
            self._token = _watcher.watch(self, keep)
        elif keep:
            _watcher.keep(self._token, self)

    def _settle(self, nbytes: Optional[int] = None) -> None:
        """Once the request is done: takes its outcome into the concurrent.futures state (once), tells the
        waiters of wait() and as_completed(), then calls the done-callbacks. No-op while it runs.
        ``nbytes``: the request's result, from a caller that has it (result() returned)."""
        if self._state in _DONE_STATES or (nbytes is None and not self._impl.done()):
            return
        if self._lazy_condition is None:
            with _conditions_made:
                if self._lazy_condition is None:  # no Condition yet, so no waiter and no callback either
                    if self._state not in _DONE_STATES:
                        self._take_outcome(nbytes)
                    return
        with self._condition:
            if self._state in _DONE_STATES:
                return
            self._take_outcome(nbytes)
            for waiter in self._waiter_list:
                if self._state == _cf.CANCELLED_AND_NOTIFIED:
                    waiter.add_cancelled(self)
                elif self._exception is not None:
                    waiter.add_exception(self)
                else:
                    waiter.add_result(self)
            self._condition.notify_all()
            callbacks, self._done_callbacks = self._done_callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                _cf.LOGGER.exception("exception calling callback for %r", self)

    def _take_outcome(self, nbytes: Optional[int]) -> None:
        if nbytes is not None:
            self._result = nbytes
        else:
            exception = self._impl.exception()  # the request is done: no wait
            if isinstance(exception, CancelledError):
                self._state = _cf.CANCELLED_AND_NOTIFIED
                return
            self._exception = exception
            if exception is None:
                self._result = int(self._impl.result())
        self._state = _cf.FINISHED

    def done(self) -> bool:
        """True once every task of the request has stopped. Never blocks."""
        if self._state in _DONE_STATES:
            return True
        self._settle()
        return self._state in _DONE_STATES

    def running(self) -> bool:
        """True until the request is done (it runs from the moment it is made). Never blocks."""
        return not self.done()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until done, or at most ``timeout`` seconds; returns :meth:`done`."""
        self._impl.wait(_args.timeout(timeout))
        return self.done()

    def _wait_or_raise(self, timeout: Any) -> None:
        seconds = _args.timeout(timeout)
        if seconds is not None and not self._impl.wait(seconds):
            raise TimeoutError(f"ferry {self._op} of {self._size} bytes at offset {self._offset} still running "
                               f"after {timeout} s")

    def result(self, timeout: Optional[float] = None) -> int:
        """Bytes transferred. Raises ``TimeoutError`` when ``timeout`` passes first (the request goes on),
        :class:`CancelledError` when the request was cancelled, else the request's error (``OSError``
        subclasses, :class:`FerryError`)."""
        self._wait_or_raise(timeout)
        try:
            nbytes = int(self._impl.result())
        except BaseException:  # the request's error, or a Ctrl-C that cancelled it
            self._settle()
            raise
        self._settle(nbytes)
        return nbytes

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """The request's error (a :class:`CancelledError` for a cancelled one), or None when it succeeded
        (waits like :meth:`result`)."""
        self._wait_or_raise(timeout)
        try:
            return self._impl.exception()
        finally:
            self._settle()

    def cancel(self) -> bool:
        """Stops the request: no task starts after this, and tasks already running finish (one
        ``task_size`` each) before it returns, so the buffer is free again when it does.

        Returns True when the request ended cancelled (then :meth:`result` raises :class:`CancelledError`;
        bytes moved by the finished tasks stay moved, and a read's buffer holds unspecified data), False
        when it had already completed or failed, as ``concurrent.futures.Future.cancel`` answers.
        """
        try:
            return bool(self._impl.cancel(True))
        finally:
            self._settle()

    def cancelled(self) -> bool:
        """True when the request is done and ended cancelled. Never blocks."""
        return self.done() and self._state == _cf.CANCELLED_AND_NOTIFIED

    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        """Calls ``fn(future)`` once the request is done: at once (on this thread) when it is, else on the
        thread that first sees it done (see the class's documentation). The future is kept alive until then."""
        self.done()  # a request over but not yet settled: settle it here, so fn runs at once
        with self._condition:
            if self._state not in _DONE_STATES:
                self._done_callbacks.append(fn)
                self._watch(keep=True)
                return
        try:
            fn(self)
        except Exception:
            _cf.LOGGER.exception("exception calling callback for %r", self)

    def _refuse(self, method: str) -> NoReturn:
        raise RuntimeError(f"{method}() is for an executor's futures: a ferry.Future's outcome is its request's")

    def set_running_or_notify_cancel(self) -> bool:
        self._refuse("set_running_or_notify_cancel")

    def set_result(self, result: int) -> None:
        self._refuse("set_result")

    def set_exception(self, exception: Optional[BaseException]) -> None:
        self._refuse("set_exception")

    @property
    def bytes_done(self) -> int:
        """Bytes moved so far by the request's finished tasks (for progress displays); the total once it
        is done. Never blocks. A stream-ordered request counts 0 until its stream reaches it."""
        return int(self._impl.bytes_done())

    @property
    def report(self) -> Report:
        """The request's route report (waits for the request; raises its error if it failed)."""
        return Report._from_parts(self._impl.report())

    def __await__(self) -> Generator[Any, None, int]:
        loop = asyncio.get_running_loop()
        woken: "asyncio.Future[None]" = loop.create_future()

        def wake(_: Any) -> None:
            try:
                loop.call_soon_threadsafe(_set_done, woken)
            except RuntimeError:  # the loop closed meanwhile: nobody waits any more
                pass

        self.add_done_callback(wake)
        try:
            yield from woken.__await__()
        except asyncio.CancelledError:
            # The awaiting task was cancelled: stop the request too, without blocking the event loop (it is
            # done once its running tasks stopped; close() and result() wait for that).
            self._impl.cancel(False)
            raise
        return self.result()

    def __repr__(self) -> str:
        if not self.done():
            state = "pending"
        else:
            state = "cancelled" if self.cancelled() else "done"
        return f"<ferry.Future {self._op} {self._size} bytes at offset {self._offset}: {state}>"


def _set_done(woken: "asyncio.Future[None]") -> None:
    if not woken.done():
        woken.set_result(None)


class _Waiters:
    """A Future's ``_waiters`` as ``concurrent.futures.wait`` and ``as_completed`` use it: the list of
    waiters, where adding one (to a future not yet settled) also has the watcher announce the request's
    completion. Made on each access, so a Future holds no reference to itself."""

    __slots__ = ("_future",)

    def __init__(self, future: Future) -> None:
        self._future = future

    def append(self, waiter: Any) -> None:
        future = self._future
        future._waiter_list.append(waiter)
        if future._state not in _DONE_STATES:
            future._watch(keep=False)  # whoever waits holds the future meanwhile

    def remove(self, waiter: Any) -> None:
        self._future._waiter_list.remove(waiter)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._future._waiter_list)

    def __len__(self) -> int:
        return len(self._future._waiter_list)


class _Watcher:
    """Settles the futures that something waits for in Python's own way (concurrent.futures' waiters,
    done-callbacks, ``await``) when their requests complete. The engine's threads never take the GIL:
    each such request puts its token on a queue when it completes (python/src/futures.hpp, "Completion
    announcements"), and one daemon thread, ``ferry-futures``, started on first use, takes the tokens and
    settles the futures. It serves until the interpreter ends it (atexit handlers can still wait). Futures
    are held weakly, except those with callbacks (kept until they ran); a future dropped meanwhile is
    forgotten, and one dropped by a Ctrl-C is cancelled as any other."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: Dict[int, Callable[[], Optional[Future]]] = {}
        self._tokens = itertools.count(1)
        self._thread: Optional[threading.Thread] = None

    def watch(self, future: Future, keep: bool) -> int:
        with self._lock:
            token = next(self._tokens)
            if keep:
                self._futures[token] = _Kept(future)
            else:
                self._futures[token] = weakref.ref(future)
            start = self._thread is None
            if start:
                self._thread = threading.Thread(target=self._run, name="ferry-futures", daemon=True)
        if start:
            assert self._thread is not None
            self._thread.start()
        future._impl.notify_when_done(token)  # announced at once when the request is over already
        return token

    def keep(self, token: int, future: Future) -> None:
        with self._lock:
            if token in self._futures:
                self._futures[token] = _Kept(future)

    def _run(self) -> None:
        while True:
            for token in _ferry.wait_for_done_futures(None):
                with self._lock:
                    ref = self._futures.pop(token, None)
                future = ref() if ref is not None else None
                if future is None:
                    continue
                try:
                    future._settle()
                except Exception:  # a bug of Ferry's: say so, and keep serving the other futures
                    _log.exception("ferry-futures could not settle %r", future)
                del future, ref  # a dropped future's request is over: its buffer goes here


class _Kept:
    """A strong reference with a weak reference's call: ``_Kept(x)() is x``."""

    __slots__ = ("_future",)

    def __init__(self, future: Future) -> None:
        self._future = future

    def __call__(self) -> Optional[Future]:
        return self._future


_watcher = _Watcher()
_forked_away: List[_Watcher] = []


def _renew_for_forked_child() -> None:
    # The child has only the thread that forked. A lock another thread of the parent held at that moment stays
    # held for good (a child forked while a parent thread settled a future hung in its first result()): make the
    # locks anew. Nor has it a ferry-futures thread, and the requests of the parent's futures do not run in it:
    # start the watcher afresh, and keep the old table (releasing its futures would wait for those requests).
    global _watcher, _conditions_made
    _conditions_made = threading.Lock()
    _forked_away.append(_watcher)
    _watcher = _Watcher()


os.register_at_fork(after_in_child=_renew_for_forked_child)


class File:
    """An open file; create it with :func:`ferry.open`. Use it as a context manager to close it.

    Reads and writes go in parallel tasks of ``task_size`` through Ferry's thread pool, to host or GPU
    memory, with the GIL released. A File may be used from many threads at once. :meth:`close` waits
    for the File's requests in flight (from any thread, blocking ones too) and refuses new ones; a
    ``KeyboardInterrupt`` that leaves a ``with`` block cancels the File's requests first.
    """

    def __init__(self, impl: "_ferry.File", mode: str) -> None:
        self._impl = impl
        self._mode = mode
        self._path = os.fsdecode(impl.path)  # decoded once: every request names it in its errors
        self.last_report: Optional[Report] = None
        """The route report of the last blocking read/readinto/write on this File."""

    # -- state

    @property
    def path(self) -> str:
        """The path the file was opened with (``os.fsdecode`` of the bytes the kernel got)."""
        return self._path

    name = path

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def closed(self) -> bool:
        """True once :meth:`close` began."""
        return bool(self._impl.closed)

    @property
    def config(self) -> Dict[str, SettingValue]:
        """The settings this File was opened with."""
        cfg = self._impl.config()
        return {name: _value_from_text(cfg.get(name)) for name in _setting_names()}

    @property
    def direct_io_available(self) -> bool:
        """Whether the file system accepted O_DIRECT for this file."""
        return bool(self._impl.direct_io_available())

    @property
    def direct_io_note(self) -> str:
        """Why O_DIRECT is unavailable, when it is."""
        return str(self._impl.direct_io_note())

    def _check_open(self) -> None:
        if self._impl.closed:
            raise ValueError(f"I/O operation on closed file {self.path!r}")

    # -- I/O

    def size(self) -> int:
        """Current size of the file in bytes."""
        self._check_open()
        return int(self._impl.size())

    def _start(self, op: str, buf: Any, offset: Any, size: Any, handle: Optional[int] = None) -> Future:
        self._check_open()
        at = _args.offset(offset, self.path)
        b = _acquire(buf, for_read=op == "read", stream=handle)
        n = _args.size(size, b.nbytes, self.path)
        _args.span(op, n, at, self.path)
        if handle is not None:
            impl = (self._impl.read_async if op == "read" else self._impl.write_async)(b, n, at, handle)
            return Future(impl, op + "_async", n, at)
        impl = self._impl.pread(b, n, at) if op == "read" else self._impl.pwrite(b, n, at)
        return Future(impl, "p" + op, n, at)

    def read_async(self, buf: Any, *positional: NoReturn, offset: int = 0, size: Optional[int] = None,
                   stream: Any) -> Future:
        """Reads ``size`` bytes (default: all of ``buf``) at ``offset`` into ``buf`` in a CUDA stream's
        order, without blocking: the read begins once the work already queued on ``stream`` has finished,
        and work queued on ``stream`` afterwards waits until the bytes are in ``buf``.

        ``stream``: a CuPy stream (``.ptr``), a PyTorch stream (``.cuda_stream``), a Numba stream
        (``.handle``), or a raw ``CUstream``/``cudaStream_t`` as an int (0: the legacy default stream).
        Any route works, and host buffers too (a later copy on ``stream`` sees the data). The returned
        :class:`Future` reports the outcome; it is done before ``stream`` goes on. A failed (or cancelled)
        read still releases the stream, so check the future: work queued after it then sees whatever the
        buffer held. The array's own producer stream is not waited for: order it with ``stream`` yourself
        (allocate and fill the array on ``stream``). Raises :class:`UnavailableError` through the future
        without a CUDA driver. See python/README.md, "Stream-ordered reads and writes".

        ``offset``, ``size`` and ``stream`` are keywords only, as for :meth:`pread`."""
        _refuse_positional("read_async", positional)
        return self._start("read", buf, offset, size, _stream_handle(stream))

    def write_async(self, buf: Any, *positional: NoReturn, offset: int = 0, size: Optional[int] = None,
                    stream: Any) -> Future:
        """Writes ``size`` bytes (default: all of ``buf``) from ``buf`` at ``offset`` in ``stream``'s order:
        the write begins once the work queued on ``stream`` before it (the kernels producing ``buf``) has
        finished, and later work on ``stream`` waits until the data is written (to the page cache, as
        :meth:`pwrite`). Otherwise as :meth:`read_async`."""
        _refuse_positional("write_async", positional)
        return self._start("write", buf, offset, size, _stream_handle(stream))

    # -- position

    def tell(self) -> int:
        """The file position: where the next blocking :meth:`read`/:meth:`readinto`/:meth:`write` starts
        (in mode "a", the end of the last write). :meth:`pread`, :meth:`pwrite` and the stream-ordered
        calls take explicit offsets and neither use nor move it."""
        return int(self._impl.tell())

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Moves the file position, as ``io.RawIOBase.seek``: ``whence`` ``os.SEEK_SET`` (0, from the start),
        ``os.SEEK_CUR`` (1) or ``os.SEEK_END`` (2, from the current size). Returns the new position.
        Seeking past the end is allowed (a read there returns 0 bytes; a write extends the file); a
        negative result raises ``ValueError``, as ``io`` does. In mode "a" writes still go to the end of
        the file. Requests in flight keep the offsets they were given."""
        self._check_open()
        delta = _args.integer("offset", offset)
        how = _args.integer("whence", whence)
        if how == os.SEEK_SET:
            base = 0
        elif how == os.SEEK_CUR:
            base = int(self._impl.tell())
        elif how == os.SEEK_END:
            base = int(self._impl.size())
        else:
            raise ValueError(f"invalid whence ({how}, should be {os.SEEK_SET}, {os.SEEK_CUR} or {os.SEEK_END})")
        to = base + delta
        if to < 0:
            raise ValueError(f"negative seek position {to}")
        if to > _args.MAX_OFFSET:
            raise OverflowError(f"seek position {to} is past the largest file offset ({_args.MAX_OFFSET})")
        self._impl.seek(to)
        return to

    def fileno(self) -> int:
        """The underlying (buffered, not O_DIRECT) file descriptor, for ``os.fstat``, ``fcntl.flock`` and
        the like. It stays the File's: do not close it, and do not use it after :meth:`close`."""
        self._check_open()
        return int(self._impl.fileno())

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return self._mode.replace("b", "") in ("r", "r+")

    def writable(self) -> bool:
        return self._mode.replace("b", "") in ("w", "r+", "a")

    def pread(self, buf: Any, *positional: NoReturn, offset: int = 0, size: Optional[int] = None) -> Future:
        """Starts reading ``size`` bytes (default: all of ``buf``) at ``offset`` into ``buf``; returns a
        :class:`Future`. ``buf`` must stay unchanged until the future is done (Ferry keeps it alive).

        ``offset`` and ``size`` are keywords only: ``f.pread(buf, offset=4096, size=100)``. KvikIO's
        ``pread(buf, size, file_offset)`` takes them the other way round, so a positional call raises
        ``TypeError`` rather than read the wrong bytes; :mod:`ferry.kvikio` takes KvikIO's order.

        ``offset`` and ``size`` are ints (or objects with ``__index__``; not bools): other types raise
        ``TypeError``, values past 2**63 - 1 ``OverflowError``, negative values and ranges that end past
        2**63 - 1 :class:`InvalidArgumentError` (a ``ValueError`` and an ``OSError`` with EINVAL), a size
        larger than ``buf`` :class:`InvalidBufferError`, all before any I/O."""
        _refuse_positional("pread", positional)
        return self._start("read", buf, offset, size)

    def pread_batch(self, dst_or_pieces: Any, offsets: Any = None, size: Optional[int] = None) -> Future:
        """Reads many pieces as one request; returns one :class:`Future` (its result: the bytes read).

        * ``pread_batch(dst, offsets, size)``, the data-loader form: piece ``i`` of ``size`` bytes at file
          offset ``offsets[i]`` lands at ``dst[i*size:(i+1)*size]`` (``dst``: any buffer Ferry accepts,
          host or GPU: NumPy, CuPy, PyTorch, DLPack; ``offsets``: a sequence or an integer array);
        * ``pread_batch(pieces)``: ``pieces`` is an iterable of ``(buf, offset)`` or ``(buf, offset, size)``.

        Into GPU memory the pieces are packed into pinned bounce buffers and moved with one copy per run of
        pieces that land back to back (the data-loader form moves 4 MiB per copy), the runs of one bounce
        buffer in one batched copy (drivers of CUDA 13 and later); into host memory each is read straight
        into place. A piece past the end of the file reads what is there (``dst`` past that is left as it
        was). Every piece is checked before any I/O: a bad one raises, naming its index. Larger batches,
        and more in flight, move faster (each one's start and end leave the copy engine idle for a moment):
        on the H200 machine, two batches of 256 MiB in flight reached 0.9 of the copy ceiling, two of 32-64
        MiB 0.72-0.87, four of 64 MiB 0.87."""
        import numpy as np

        self._check_open()
        if offsets is None:
            keep: List[Any] = []
            addresses: List[int] = []
            sizes: List[int] = []
            offs: List[int] = []
            for i, item in enumerate(dst_or_pieces):
                if not isinstance(item, tuple) or len(item) not in (2, 3):
                    raise TypeError(f"piece {i}: expected (buf, offset) or (buf, offset, size), got {item!r}")
                b = _acquire(item[0], for_read=True)
                at = _args.offset(item[1], self.path)
                n = _args.size(item[2] if len(item) == 3 else None, b.nbytes, self.path)
                _args.span("read", n, at, self.path)
                keep.append(b)
                addresses.append(b.address)
                sizes.append(n)
                offs.append(at)
            arrays = [np.asarray(v, dtype=np.uint64) for v in (addresses, sizes, offs)]
            impl = self._impl.pread_batch(keep, *arrays)
            return Future(impl, "pread_batch", int(arrays[1].sum()), 0)
        if size is None:
            raise TypeError("pread_batch(dst, offsets, size): size is required with offsets")
        n = _args.size(size, _args.MAX_OFFSET, self.path)
        raw = np.asarray(offsets)
        if raw.ndim != 1 or not (raw.dtype.kind in "iu" or raw.size == 0):
            raise TypeError(f"offsets must be a one-dimensional sequence of integers, not {raw.dtype} of shape {raw.shape}")
        if raw.size and raw.dtype.kind == "i" and int(raw.min()) < 0:
            i = int(np.argmin(raw))
            raise _errors_invalid_argument(f"piece {i}: offset {int(raw[i])} is negative", self.path)
        offsets_array = raw.astype(np.uint64)
        count = len(offsets_array)
        b = _acquire(dst_or_pieces, for_read=True)
        if count * n > b.nbytes:
            raise InvalidBufferError(f"{count} pieces of {n} bytes need {count * n} bytes; the buffer holds {b.nbytes}")
        starts = np.uint64(b.address) + np.arange(count, dtype=np.uint64) * np.uint64(n)
        lengths = np.full(count, n, dtype=np.uint64)
        impl = self._impl.pread_batch([b], starts, lengths, offsets_array)
        return Future(impl, "pread_batch", count * n, 0)

    def pwrite(self, buf: Any, *positional: NoReturn, offset: int = 0, size: Optional[int] = None) -> Future:
        """Starts writing ``size`` bytes (default: all of ``buf``) from ``buf`` at ``offset``; returns a
        :class:`Future`. The data is in the page cache when it completes: call :meth:`sync` for
        durability. ``offset`` and ``size`` are keywords only, and checked, as for :meth:`pread`."""
        _refuse_positional("pwrite", positional)
        return self._start("write", buf, offset, size)

    def read(self, buf_or_size: Any = -1, size: Optional[int] = None, *, progress: _progress.Progress = None) -> Any:
        """Blocking read at the file position, which advances by the bytes read.

        * ``read(buf)`` / ``read(buf, size)``: reads into ``buf`` (any buffer, host or GPU) and returns the
          number of bytes read (fewer than asked only at the end of the file), like ``readinto``;
        * ``read(n)``: returns up to ``n`` bytes as ``bytes``; ``read()``, ``read(-1)`` and ``read(None)``
          read to the end.

        The route report of the read is in :attr:`last_report`. A Ctrl-C while it waits cancels the read,
        leaves the position where the read began, and raises ``KeyboardInterrupt``.

        ``progress``: a callable called as ``progress(bytes_done, total)`` about every 0.1 s and once at the
        end (an exception it raises cancels the read and propagates), or True for a bar: tqdm's when tqdm
        is importable, else a line on stderr (terminals only). ``read(n)`` takes it too.
        """
        if buf_or_size is None or (isinstance(buf_or_size, numbers.Integral) and not _args.is_bool(buf_or_size)):
            if size is not None:
                raise TypeError("read(n) takes no size argument; use read(buf, size) to read into a buffer")
            self._check_open()
            n = _args.read_length(buf_or_size)
            if n < 0:
                n = int(self._impl.size())
                if n == 0:
                    return self._read_to_the_end()
            if progress is not None and progress is not False:
                into = bytearray(n)
                got = self.readinto(into, progress=progress)
                return bytes(memoryview(into)[:got])
            data, parts = self._impl.read_bytes(n)
            self.last_report = Report._from_parts(parts)
            return data
        if _args.is_bool(buf_or_size) or isinstance(buf_or_size, numbers.Real):
            raise TypeError(f"read() takes an integer, None or a buffer, not {type(buf_or_size).__name__!r}")
        return self.readinto(buf_or_size, size, progress=progress)

    def _read_to_the_end(self) -> bytes:
        """``read()`` of a file that says it holds nothing: an empty file, or one without a size (a /proc or
        /sys file, a character device), which is read in growing pieces until one comes back short."""
        chunks = []
        piece = 64 << 10
        while True:
            data, parts = self._impl.read_bytes(piece)
            self.last_report = Report._from_parts(parts)
            chunks.append(data)
            if len(data) < piece:
                return b"".join(chunks)
            piece = min(piece * 8, 1 << 30)

    def readinto(self, buf: Any, size: Optional[int] = None, *, progress: _progress.Progress = None) -> int:
        """Blocking read at the file position into ``buf``; returns the bytes read. A Ctrl-C while it
        waits cancels the read, leaves the position where the read began, and raises
        ``KeyboardInterrupt``. ``progress`` as for :meth:`read`."""
        self._check_open()
        b = _acquire(buf, for_read=True)
        n = _args.size(size, b.nbytes, self.path)
        return self._at_position(b, n, progress, "reading", self._impl.read_at_position)

    def write(self, buf: Any, size: Optional[int] = None, *, progress: _progress.Progress = None) -> int:
        """Blocking write of ``size`` bytes (default: all of ``buf``) at the file position (at the end in
        mode "a"); returns the bytes written. A Ctrl-C while it waits cancels the write (bytes already
        written stay written), leaves the position where the write began, and raises
        ``KeyboardInterrupt``. ``progress`` as for :meth:`read`."""
        self._check_open()
        b = _acquire(buf, for_read=False)
        n = _args.size(size, b.nbytes, self.path)
        return self._at_position(b, n, progress, "writing", self._impl.write_at_position)

    def _at_position(self, b: Any, n: int, progress: _progress.Progress, verb: str, start: Any) -> int:
        """A blocking read or write of ``n`` bytes at the file position, through the future ``start``
        returns, which the progress display polls when there is one."""
        report = _progress.callback(progress, n, f"{verb} {os.path.basename(self.path)}")
        impl = start(b, n)
        if report is not None:
            _progress.wait_with_progress(impl, report, n)
        got = int(impl.result())
        self.last_report = Report._from_parts(impl.report())
        return got

    def sync(self) -> None:
        """fdatasync: what was written is on the device when this returns."""
        self._check_open()
        self._impl.sync()

    def report(self) -> Report:
        """The route report of every operation of this File so far."""
        return Report._from_parts(self._impl.report())

    def close(self) -> None:
        """Refuses new requests, waits for the File's requests in flight (futures and blocking calls on
        any thread), then closes it. Closing twice is allowed. A Ctrl-C while it waits cancels those
        requests; the File is closed once their running tasks stopped, then ``KeyboardInterrupt``
        propagates."""
        self._impl.close()

    def __enter__(self) -> "File":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self._impl.cancel_all()  # Ctrl-C: stop this File's requests rather than wait for them
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<ferry.File {self.path!r} mode={self._mode!r} {state}>"


def open(path: PathLike, mode: str = "r", *, credentials: Any = None,  # noqa: A001 (like io.open)
         **settings: SettingValue) -> File:
    """Opens ``path`` (a file, or an ``http(s)://`` or ``s3://`` URL: see :mod:`ferry.remote`) for Ferry I/O.

    ``mode``: "r" (read), "w" (create or truncate; write), "r+" (read and write an existing file), "a"
    (create if needed; write() appends). A "b" is accepted and ignored: Ferry I/O is always binary.
    ``settings`` override :data:`ferry.config` for this file only, e.g. ``ferry.open(p, compat_mode="on",
    task_size="1MiB")``.

    ``path`` is a ``str``, ``bytes`` or ``os.PathLike``, as for ``open()``: other types (file descriptors
    too) raise ``TypeError``, a NUL byte ``ValueError``. FIFOs and sockets are refused at once
    (:class:`InvalidArgumentError`, errno ESPIPE): Ferry reads and writes at offsets.

    ``credentials``: a :class:`ferry.remote.Credentials` to sign ``s3://`` requests with, instead of the
    environment's or the ~/.aws files'.

    Raises ``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError`` (``OSError`` with ``errno``
    and ``filename``, a URL's display form for URLs), or :class:`InvalidArgumentError` for a bad mode or
    setting.
    """
    fs_path = _args.fs_path(path)
    cpp_mode = _args.text("mode", mode).replace("b", "")
    cfg = _overrides(settings, "ferry.open() got an unknown setting")
    signed = None
    if credentials is not None:
        from .remote import Credentials

        if not isinstance(credentials, Credentials):
            raise TypeError(f"credentials must be a ferry.remote.Credentials, not {type(credentials).__name__}")
        signed = credentials._triple()
    return File(_ferry.File.open(fs_path, cpp_mode, cfg, signed), mode)


@atexit.register
def _stop_requests_after_ctrl_c() -> None:
    """At exit after an unhandled KeyboardInterrupt, cancels the requests still running (futures the
    program kept, in locals the traceback holds, or in globals), so that the interpreter, which waits for
    each when it drops its future, exits at once. A normal exit still completes them (a pwrite whose
    future was never waited for is written). Then lets go of the buffers of futures an interrupt dropped,
    once their (cancelled) requests are over."""
    if isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
        _ferry.cancel_all_requests()
    _ferry.reap_parked(True)


# KvikIO's spelling of each call whose offset and size are keywords only here (see _refuse_positional).
_KVIKIO_ORDER = {
    "pread": "CuFile.pread(buf, size, file_offset)",
    "pwrite": "CuFile.pwrite(buf, size, file_offset)",
    "read_async": "CuFile.raw_read_async(buf, stream, size, file_offset)",
    "write_async": "CuFile.raw_write_async(buf, stream, size, file_offset)",
}


def _refuse_positional(method: str, extra: Tuple[Any, ...]) -> None:
    """Raises the TypeError for ``File.<method>(buf, a, ...)``. Ferry once took ``(buf, offset, size)``
    there and KvikIO takes ``(buf, size, file_offset)``: the same call meant different bytes, and a KvikIO
    habit read nothing without a word (``f.pread(buf, 100, 0)`` was 0 bytes at offset 100)."""
    if not extra:
        return
    shown = ", ".join(repr(a) for a in extra)
    stream = ", stream=s" if method.endswith("_async") else ""
    raise TypeError(
        f"File.{method}() takes offset and size as keywords only: f.{method}(buf, offset=..., size=...{stream}), "
        f"not {len(extra)} more positional argument{'s' if len(extra) > 1 else ''} ({shown}). KvikIO's order is "
        f"(buf, size, file_offset), as in {_KVIKIO_ORDER[method]}: for KvikIO code, ferry.kvikio.CuFile takes "
        "that order")


def _stream_handle(stream: Any) -> int:
    """A CUstream handle from a CuPy stream (``.ptr``), a PyTorch stream (``.cuda_stream``), a Numba stream
    (``.handle``, a ctypes pointer) or an int."""
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if value is not None:
            value = getattr(value, "value", value)  # ctypes c_void_p (Numba)
            stream = 0 if value is None else value
            break
    if _args.is_bool(stream) or not isinstance(stream, numbers.Integral):
        raise TypeError(f"stream must be a CUDA stream (CuPy, PyTorch, Numba) or an int handle, not "
                        f"{type(stream).__name__!r}")
    handle = int(stream)
    if handle < 0 or handle > _args.MAX_U64:
        raise ValueError(f"stream handle {handle} is not a pointer")
    return handle
