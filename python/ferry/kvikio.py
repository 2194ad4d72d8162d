"""ferry.kvikio: code written for KvikIO's Python API, run on Ferry's engine, one import away.

::

    import cupy
    import ferry.kvikio as kvikio                    # instead of: import kvikio

    a = cupy.arange(100)
    with kvikio.CuFile("test-file", "w") as f:
        f.write(a)                                   # blocking; returns the bytes written
    b = cupy.empty_like(a)
    with kvikio.CuFile("test-file", "r") as f:
        f.read(b)                                    # a blocking read of offset 0, as often as it is called
        first = f.pread(b[:50])                      # (buf, size=None, file_offset=0, task_size=None)
        second = f.pread(b[50:], file_offset=b[:50].nbytes)
        first.get() + second.get()                   # IOFuture.get(): the bytes, or the request's error
        print(f.report())                            # Ferry's route report: the route of every byte, and why

What KvikIO's documentation promises, this module keeps:

* ``CuFile(file, flags="r")``, with ``close()``, ``closed``, ``fileno()``, ``open_flags()`` and ``with``.
  ``flags``: "r", "r+", "w" (create or truncate), "w+" (the same, and readable), as KvikIO opens them; "a"
  (create if needed, no truncation; writes land at the offsets given), which KvikIO's docstring lists and
  its code refuses. A "b" is ignored.
* ``pread``/``pwrite(buf, size=None, file_offset=0, task_size=None)`` return an :class:`IOFuture` (``get()``,
  ``done()``); ``read``/``write`` with the same arguments block and return the bytes moved. The offset is
  always ``file_offset``: unlike Python's files there is no file position, so a second ``read(buf)`` reads
  offset 0 again. ``raw_read``/``raw_write(buf, size=None, file_offset=0, dev_offset=0)`` block too, and
  ``raw_read_async``/``raw_write_async(buf, stream, size=None, file_offset=0, dev_offset=0)`` are ordered on
  a CUDA stream (CuPy, PyTorch or Numba stream, or a raw handle as an int) and return an
  :class:`IOFutureStream` whose ``check_bytes_done()`` waits for the request, synchronizes the stream and
  returns the bytes moved. ``dev_offset`` is where in ``buf`` the bytes go (or come from).
* ``kvikio.defaults`` in both of KvikIO's styles: ``get("num_threads")``, ``set("num_threads", 8)``,
  ``set({"task_size": 1 << 20, ...})`` (applied at once; as a ``with`` block, undone at its end), and the
  older ``num_threads()``, ``num_threads_reset(8)``, ``set_num_threads(8)`` (a context manager) and the same
  for ``compat_mode``, ``task_size``, ``gds_threshold`` and ``bounce_buffer_size``.
  ``compat_mode()`` returns a :class:`CompatMode`; the setters take one, a bool (the older API), or the
  words ``KVIKIO_COMPAT_MODE`` takes.
* The environment variables ``KVIKIO_COMPAT_MODE`` (``ON``, ``OFF``, ``AUTO``, or ``TRUE``/``YES``/``1`` and
  ``FALSE``/``NO``/``0``, any case), ``KVIKIO_NTHREADS``, ``KVIKIO_TASK_SIZE``, ``KVIKIO_GDS_THRESHOLD`` and
  ``KVIKIO_BOUNCE_BUFFER_SIZE``, read when this module is imported (a bad value raises
  :class:`ferry.InvalidArgumentError` there, naming the variable).

How it maps onto Ferry: ``kvikio.defaults`` is :data:`ferry.config` under KvikIO's names (``compat_mode``
is ``compat_mode``, ON/OFF/AUTO being "on"/"off"/"auto"; ``num_threads`` is ``threads``; ``task_size``,
``gds_threshold`` and ``bounce_buffer_size`` keep their names), so a setting made either way is seen the
other way. A ``KVIKIO_*`` variable is applied to a setting still at its built-in default: a ``FERRY_*``
variable for the same setting, or a value set in code before the import, wins. Settings so applied, and
those set through ``kvikio.defaults``, show as set in code (``ferry.config.source(name) == "api"``). Where
KvikIO and Ferry disagree on a default, Ferry's stays: ``num_threads`` is 4-16 (KvikIO: 1),
``gds_threshold`` 16 KiB (KvikIO: 1 MiB), ``bounce_buffer_size`` 4 MiB (KvikIO: 16 MiB).

A CuFile opens a :class:`ferry.File` with the settings of the moment; its compatibility mode stays as it
was at the open, as KvikIO decides it per file. ``task_size`` given to a call, and ``num_threads``,
``task_size``, ``gds_threshold`` or ``bounce_buffer_size`` changed after the open, apply to the calls
that follow, as in KvikIO: the CuFile opens the file once more with those settings (once per
combination, closed with it). :meth:`CuFile.report` adds up the reports of all of them.

Every handle keeps Ferry's report: :meth:`CuFile.report`, :meth:`IOFuture.report` and
:meth:`IOFutureStream.report` return a :class:`ferry.Report` (routes, reasons, O_DIRECT counts, cuFile's
counters). ``IOFuture.future`` is the underlying :class:`ferry.Future`, a ``concurrent.futures.Future``.

What differs from KvikIO: errors are Ferry's (``OSError`` subclasses such as ``FileNotFoundError``,
:class:`ferry.FerryError`, ``ValueError``/``TypeError`` for bad arguments, all before any I/O) rather than
``RuntimeError``; every call takes host memory too (KvikIO's raw calls take device memory only); Ctrl-C
during a wait cancels the request, as everywhere in Ferry. Not provided: ``RemoteFile`` (give
:func:`ferry.open` an ``http(s)://`` or ``s3://`` URL), ``Mmap``, ``cufile_driver``, the ``http_*``
settings (Ferry's are ``remote_*``: docs/settings.md), nvCOMP and Zarr.
"""

from __future__ import annotations

import enum
import fcntl
import numbers
import os
import threading
import weakref
from typing import Any, Dict, Mapping, Optional, Tuple, Union, overload

from . import _args, _ferry
from ._buffers import acquire as _acquire
from ._config import SettingValue
from ._config import config as _config
from ._errors import InvalidArgumentError
from ._errors import invalid_argument as _invalid_argument
from ._file import File, Future, PathLike, _stream_handle
from ._file import open as _open
from ._report import Report

__all__ = ["CuFile", "IOFuture", "IOFutureStream", "CompatMode", "ConfigContextManager", "defaults"]


class CompatMode(enum.IntEnum):
    """KvikIO's compatibility mode: ``ON`` never uses cuFile (Ferry's staged and host routes), ``OFF``
    always does (an error where it cannot), ``AUTO`` where cuFile moves data directly. Ferry's
    ``compat_mode`` setting "on", "off" and "auto"."""

    OFF = 0
    ON = 1
    AUTO = 2


_FERRY_COMPAT = {CompatMode.ON: "on", CompatMode.OFF: "off", CompatMode.AUTO: "auto"}
_COMPAT_WORDS = {
    "on": CompatMode.ON, "true": CompatMode.ON, "yes": CompatMode.ON, "1": CompatMode.ON,
    "off": CompatMode.OFF, "false": CompatMode.OFF, "no": CompatMode.OFF, "0": CompatMode.OFF,
    "auto": CompatMode.AUTO,
}

# KvikIO's name of each setting -> (Ferry's name, KvikIO's environment variable).
_SETTINGS: Dict[str, Tuple[str, str]] = {
    "compat_mode": ("compat_mode", "KVIKIO_COMPAT_MODE"),
    "num_threads": ("threads", "KVIKIO_NTHREADS"),
    "task_size": ("task_size", "KVIKIO_TASK_SIZE"),
    "gds_threshold": ("gds_threshold", "KVIKIO_GDS_THRESHOLD"),
    "bounce_buffer_size": ("bounce_buffer_size", "KVIKIO_BOUNCE_BUFFER_SIZE"),
}

# The settings KvikIO reads at every call rather than at the open; a CuFile follows them (see _handle).
_PER_CALL = ("threads", "task_size", "gds_threshold", "bounce_buffer_size")


def _compat_mode(value: Any, what: str) -> CompatMode:
    """A CompatMode from what KvikIO takes: a CompatMode, a bool (True: ON), or a word of KVIKIO_COMPAT_MODE."""
    if isinstance(value, CompatMode):
        return value
    if isinstance(value, bool):
        return CompatMode.ON if value else CompatMode.OFF
    if isinstance(value, str):
        mode = _COMPAT_WORDS.get(value.strip().lower())
        if mode is None:
            raise _invalid_argument(f"{what}: cannot use {value!r} (expected ON, OFF or AUTO, or TRUE, YES, 1, "
                                    "FALSE, NO, 0, in any case)")
        return mode
    if isinstance(value, numbers.Integral) and int(value) in (0, 1, 2):
        return CompatMode(int(value))
    raise TypeError(f"{what} takes a kvikio.CompatMode, a bool or a str, not {type(value).__name__}")


def _setting(name: str) -> str:
    """Ferry's name of KvikIO's setting ``name``; KeyError, naming the settings, for others."""
    if not isinstance(name, str) or name not in _SETTINGS:
        raise KeyError(f"{name!r} is not a KvikIO setting Ferry maps (settings: {', '.join(_SETTINGS)}; Ferry's own "
                       "are in ferry.config)")
    return _SETTINGS[name][0]


def _ferry_value(name: str, value: Any) -> SettingValue:
    if name == "compat_mode":
        return _FERRY_COMPAT[_compat_mode(value, "compat_mode")]
    if _args.is_bool(value):
        raise TypeError(f"{name} takes an int, not bool")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, str):
        return value  # "4MiB": Ferry's setting says whether it parses
    raise TypeError(f"{name} takes an int (or a size such as \"4MiB\"), not {type(value).__name__}")


def _get(name: str) -> Any:
    value = getattr(_config, _setting(name))
    return _COMPAT_WORDS[value] if name == "compat_mode" else int(value)


def _set(settings: Mapping[str, Any]) -> None:
    """Sets KvikIO's ``settings`` in ferry.config: all of them, or (one being invalid) none."""
    _config.update(**{_setting(name): _ferry_value(name, value) for name, value in settings.items()})


class ConfigContextManager:
    """What :func:`defaults.set` returns: the settings are made when it is created; leaving a ``with`` block
    around it puts back the values they had before (the others stay as the block left them)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._before = {name: _get(name) for name in settings}
        _set(settings)

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _set(self._before)


def _older_style(name: str) -> Tuple[Any, Any, Any]:
    """KvikIO's older functions for setting ``name``: its getter (a :class:`CompatMode` for "compat_mode", else
    an int), ``<name>_reset(value)`` and ``set_<name>(value)``, as static methods."""

    def getter() -> Any:
        return _get(name)

    def reset(value: Any) -> None:
        _set({name: value})

    def scoped(value: Any) -> ConfigContextManager:
        return ConfigContextManager({name: value})

    return staticmethod(getter), staticmethod(reset), staticmethod(scoped)


class _Defaults:
    """``kvikio.defaults``: KvikIO's settings, read and written in :data:`ferry.config` (see the module's
    documentation for the names and defaults). Both of KvikIO's styles: ``get(name)`` and ``set(name,
    value)`` / ``set({name: value, ...})`` (a context manager too), and the older functions per setting."""

    @staticmethod
    def get(name: str) -> Any:
        """The value of KvikIO's setting ``name``: a :class:`CompatMode` for "compat_mode", else an int."""
        return _get(name)

    @overload
    @staticmethod
    def set(settings: Mapping[str, Any], /) -> ConfigContextManager: ...

    @overload
    @staticmethod
    def set(name: str, value: Any, /) -> ConfigContextManager: ...

    @staticmethod
    def set(*settings: Any) -> ConfigContextManager:
        """``set(name, value)`` or ``set({name: value, ...})``: made at once; ``with set(...):`` undoes them at
        the end of the block. Invalid values raise :class:`ferry.InvalidArgumentError` and change nothing."""
        if len(settings) == 1 and isinstance(settings[0], Mapping):
            return ConfigContextManager(settings[0])
        if len(settings) == 2 and isinstance(settings[0], str):
            return ConfigContextManager({settings[0]: settings[1]})
        raise ValueError("kvikio.defaults.set takes a dict of settings, or a name and a value: "
                         "set({'num_threads': 8}) or set('num_threads', 8)")

    @staticmethod
    def is_compat_mode_preferred() -> bool:
        """Whether I/O into GPU memory would not use cuFile here: compat_mode ON, or AUTO where cuFile
        cannot move data directly (ferry.doctor()'s prediction)."""
        mode = _get("compat_mode")
        if mode != CompatMode.AUTO:
            return bool(mode == CompatMode.ON)
        from . import doctor

        return not bool(doctor()["prediction"].get("direct"))

    # The older style: a getter, name_reset(value) and set_name(value) (applied at once, and a context
    # manager), per setting; get_num_threads is the oldest getter's name.
    compat_mode, compat_mode_reset, set_compat_mode = _older_style("compat_mode")
    num_threads, num_threads_reset, set_num_threads = _older_style("num_threads")
    get_num_threads = num_threads
    task_size, task_size_reset, set_task_size = _older_style("task_size")
    gds_threshold, gds_threshold_reset, set_gds_threshold = _older_style("gds_threshold")
    bounce_buffer_size, bounce_buffer_size_reset, set_bounce_buffer_size = _older_style("bounce_buffer_size")

    def __repr__(self) -> str:
        return "kvikio.defaults(" + ", ".join(f"{name}={_get(name)!r}" for name in _SETTINGS) + ")"


#: KvikIO's ``kvikio.defaults``.
defaults = _Defaults()


def _apply_environment(environ: Mapping[str, str]) -> None:
    """KvikIO's variables, for the settings still at Ferry's built-in defaults (see the module's doc)."""
    for name, (ferry_name, variable) in _SETTINGS.items():
        text = environ.get(variable, "").strip()
        if not text or _config.source(ferry_name) != "default":
            continue
        value: SettingValue = _FERRY_COMPAT[_compat_mode(text, variable)] if name == "compat_mode" else text
        try:
            _config.update(**{ferry_name: value})
        except InvalidArgumentError as e:
            raise _invalid_argument(f"{variable}={text!r} (Ferry's {ferry_name}): {e}") from None


_apply_environment(os.environ)


# ---------------------------------------------------------------------------------------------- futures


class _RequestHandle:
    """What both KvikIO future types share: the :class:`ferry.Future` under them and its route report."""

    __slots__ = ("_future",)

    def __init__(self, future: Future) -> None:
        self._future = future

    def report(self) -> Report:
        """The request's route report (waits for the request; raises its error if it failed)."""
        return self._future.report

    @property
    def future(self) -> Future:
        return self._future


class IOFuture(_RequestHandle):
    """What :meth:`CuFile.pread` and :meth:`CuFile.pwrite` return. ``get()`` waits and returns the bytes
    moved (fewer than asked only when a read reached the end of the file) or raises the request's error;
    ``done()`` does not wait. ``future`` is the :class:`ferry.Future` (``concurrent.futures.wait``,
    ``asyncio.wrap_future``, ``cancel()``); keep the IOFuture, or it, until the request is done: dropping
    both waits for it."""

    __slots__ = ()

    def get(self) -> int:
        return self._future.result()

    def done(self) -> bool:
        return self._future.done()

    def __repr__(self) -> str:
        return f"<ferry.kvikio.IOFuture of {self._future!r}>"


class IOFutureStream(_RequestHandle):
    """What :meth:`CuFile.raw_read_async` and :meth:`CuFile.raw_write_async` return. ``check_bytes_done()``
    waits for the request, then synchronizes its stream (as KvikIO does: work queued after the request
    is waited for too), and returns the bytes moved, or raises the request's error."""

    __slots__ = ("_stream", "_device")

    def __init__(self, future: Future, stream: int, device: int) -> None:
        super().__init__(future)
        self._stream = stream
        self._device = device

    def check_bytes_done(self) -> int:
        n = self._future.result()
        _ferry.synchronize_stream(self._stream, self._device)
        return n

    def __repr__(self) -> str:
        return f"<ferry.kvikio.IOFutureStream of {self._future!r} on stream {self._stream:#x}>"


# ----------------------------------------------------------------------------------------------- CuFile


def _ferry_mode(flags: Any) -> str:
    """Ferry's mode for KvikIO's ``flags``: "r", "r+", "w", "w+" as KvikIO opens them, and "a"."""
    text = _args.text("flags", flags).replace("b", "")
    if text in ("r", "r+", "w", "w+", "a"):
        return text
    raise ValueError(f"unknown flags {flags!r}: CuFile takes \"r\", \"r+\", \"w\", \"w+\" or \"a\"")


def _device_of(buffer: Any) -> int:
    """The device whose context a stream of this buffer belongs to (0 for host memory)."""
    return max(int(buffer.device_id), 0) if int(buffer.device_type) != 1 else 0


# Every CuFile, for a forked child to make their locks anew: a parent thread that held one at the fork (looking up
# the File of a call's own task_size) left the child's copy held for good.
_cufiles: "weakref.WeakSet[CuFile]" = weakref.WeakSet()


def _renew_locks_for_forked_child() -> None:
    for cufile in list(_cufiles):
        cufile._lock = threading.Lock()


os.register_at_fork(after_in_child=_renew_locks_for_forked_child)


class CuFile:
    """KvikIO's file handle, on a :class:`ferry.File` (see the module's documentation).

    ``file``: a path (``str``, ``bytes`` or ``os.PathLike``). ``flags``: "r" (read), "r+" (read and write),
    "w" (create or truncate; write), "w+" ("w", and readable), "a" (create if needed; write at the offsets
    given). Raises as :func:`ferry.open` raises (``FileNotFoundError``, ``PermissionError``, ...).

    Thread safety: a CuFile may be used from many threads at once; :meth:`close` must not race them."""

    def __init__(self, file: PathLike, flags: str = "r") -> None:
        mode = _ferry_mode(flags)
        self._flags = flags
        self._path = file
        self._reads = mode in ("r", "r+", "w+")
        self._writes = mode != "r"
        self._mode_again = {"w": "r+", "w+": "r+"}.get(mode, mode)  # a second open must not truncate
        self._file = _open(file, mode)
        cfg = self._file._impl.config()
        self._compat = cfg.get("compat_mode")
        self._key = tuple(cfg.get(name) for name in _PER_CALL)
        self._others: Dict[Tuple[str, ...], File] = {}
        self._lock = threading.Lock()
        _cufiles.add(self)

    # -- state

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        """Waits for the requests in flight, then closes the file (closing twice is allowed)."""
        self._file.close()
        for other in self._handles()[1:]:
            other.close()

    def fileno(self) -> int:
        """The file's (buffered) descriptor; it stays the CuFile's."""
        return self._file.fileno()

    def open_flags(self) -> int:
        """The flags of :meth:`fileno` (``fcntl(fd, F_GETFL)``, see open(2))."""
        return int(fcntl.fcntl(self.fileno(), fcntl.F_GETFL))

    @property
    def ferry_file(self) -> File:
        """The :class:`ferry.File` the CuFile opened (with the settings of the open)."""
        return self._file

    def report(self) -> Report:
        """Ferry's route report of every operation of this CuFile so far."""
        return Report._from_parts(self._file._impl.report([f._impl for f in self._handles()[1:]]))

    def _handles(self) -> Tuple[File, ...]:
        with self._lock:
            return (self._file, *self._others.values())

    def _handle(self, reading: bool, task_size: Optional[int]) -> File:
        """The File for a call now: the one opened with the CuFile, unless the settings KvikIO reads per call
        (the call's ``task_size`` too) differ from its own; then one opened with them (once per set)."""
        if (reading and not self._reads) or (not reading and not self._writes):
            return self._file  # its own error says why
        cfg = _ferry.default_config()
        key = tuple(cfg.get(name) for name in _PER_CALL)
        if task_size is not None:
            n = _args.integer("task_size", task_size)
            key = (key[0], str(n), *key[2:])
        if key == self._key:
            return self._file
        with self._lock:
            other = self._others.get(key)
            if other is None:
                self._file._check_open()
                settings: Dict[str, SettingValue] = dict(zip(_PER_CALL, key))
                other = self._others[key] = _open(self._path, self._mode_again, compat_mode=self._compat, **settings)
        return other

    # -- I/O

    def pread(self, buf: Any, size: Optional[int] = None, file_offset: int = 0,
              task_size: Optional[int] = None) -> IOFuture:
        """Starts reading ``size`` bytes (default: all of ``buf``) at ``file_offset`` into ``buf`` (host or
        device memory), in parallel tasks of ``task_size`` (default: ``defaults.task_size()``)."""
        return IOFuture(self._handle(True, task_size).pread(buf, offset=file_offset, size=size))

    def pwrite(self, buf: Any, size: Optional[int] = None, file_offset: int = 0,
               task_size: Optional[int] = None) -> IOFuture:
        """Starts writing ``size`` bytes (default: all of ``buf``) from ``buf`` at ``file_offset``; the data
        is in the page cache when it completes."""
        return IOFuture(self._handle(False, task_size).pwrite(buf, offset=file_offset, size=size))

    def read(self, buf: Any, size: Optional[int] = None, file_offset: int = 0,
             task_size: Optional[int] = None) -> int:
        """:meth:`pread` and wait: the bytes read (at ``file_offset``: there is no file position)."""
        return self.pread(buf, size, file_offset, task_size).get()

    def write(self, buf: Any, size: Optional[int] = None, file_offset: int = 0,
              task_size: Optional[int] = None) -> int:
        """:meth:`pwrite` and wait: the bytes written."""
        return self.pwrite(buf, size, file_offset, task_size).get()

    def _part(self, buf: Any, dev_offset: Any, reading: bool, stream: Optional[int] = None) -> Tuple[Any, int]:
        """``buf`` from byte ``dev_offset`` on, and the device its memory is on."""
        whole = _acquire(buf, for_read=reading, stream=stream)
        skip = _args.integer("dev_offset", dev_offset)
        if skip < 0 or skip > whole.nbytes:
            raise _invalid_argument(f"dev_offset {skip} is outside the buffer of {whole.nbytes} bytes")
        if skip == 0:
            return whole, _device_of(whole)
        part = _ferry.Buffer.from_pointer(whole.address + skip, whole.nbytes - skip, whole.readonly,
                                          whole.device_type, whole.device_id, whole, whole.origin)
        return part, _device_of(whole)

    def raw_read(self, buf: Any, size: Optional[int] = None, file_offset: int = 0, dev_offset: int = 0) -> int:
        """Reads ``size`` bytes (default: the rest of ``buf``) at ``file_offset`` into ``buf`` from byte
        ``dev_offset`` on, and waits; returns the bytes read."""
        part, _ = self._part(buf, dev_offset, True)
        return self._handle(True, None).pread(part, offset=file_offset, size=size).result()

    def raw_write(self, buf: Any, size: Optional[int] = None, file_offset: int = 0, dev_offset: int = 0) -> int:
        """Writes ``size`` bytes (default: the rest of ``buf``) of ``buf`` from byte ``dev_offset`` on at
        ``file_offset``, and waits; returns the bytes written."""
        part, _ = self._part(buf, dev_offset, False)
        return self._handle(False, None).pwrite(part, offset=file_offset, size=size).result()

    def raw_read_async(self, buf: Any, stream: Any, size: Optional[int] = None, file_offset: int = 0,
                       dev_offset: int = 0) -> IOFutureStream:
        """Reads in ``stream``'s order (:meth:`ferry.File.read_async`): it begins after the work queued on
        ``stream`` and the work queued afterwards sees the bytes. Keep the returned future until
        ``check_bytes_done()``. Without a CUDA driver, ``check_bytes_done()`` raises
        :class:`ferry.UnavailableError`."""
        handle = _stream_handle(stream)
        part, device = self._part(buf, dev_offset, True, handle)
        future = self._handle(True, None).read_async(part, offset=file_offset, size=size, stream=handle)
        return IOFutureStream(future, handle, device)

    def raw_write_async(self, buf: Any, stream: Any, size: Optional[int] = None, file_offset: int = 0,
                        dev_offset: int = 0) -> IOFutureStream:
        """Writes in ``stream``'s order (:meth:`ferry.File.write_async`): after the work queued on ``stream``
        (the kernels producing ``buf``); the work queued afterwards waits for the write."""
        handle = _stream_handle(stream)
        part, device = self._part(buf, dev_offset, False, handle)
        future = self._handle(False, None).write_async(part, offset=file_offset, size=size, stream=handle)
        return IOFutureStream(future, handle, device)

    # -- context manager

    def __enter__(self) -> "CuFile":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        for f in self._handles():
            f.__exit__(exc_type, exc, tb)  # a Ctrl-C cancels the requests first, as ferry.File does

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<ferry.kvikio.CuFile {self._file.path!r} flags={self._flags!r} {state}>"
