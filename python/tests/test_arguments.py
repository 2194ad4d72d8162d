"""Arguments: every public entry point refuses what the standard library refuses, with the same
exception types, before any I/O.

Each row of TABLE names a mistake, what Ferry raises for it, and the nearest standard-library call with
the same mistake and what that raises on this Python. test_the_standard_library_column_is_true runs the
standard-library column, so the comparison cannot drift. Where the columns differ on purpose the row
says why (bools: the standard library takes True as 1; Ferry refuses it, as NumPy refuses bool indices).
"""

from __future__ import annotations

import concurrent.futures
import errno
import math
import os
import threading
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Type

import numpy as np
import pytest

import ferry

BIG = 2**63
HUGE = 2**64


class Row(NamedTuple):
    what: str
    ferry_call: Callable[[ferry.File, Any], Any]  # (file opened "r+" on a 100-byte file, a 10-byte buffer)
    ferry_raises: Type[BaseException]
    std_call: Optional[Callable[[int, Any], Any]]  # (descriptor of the same file, io file object)
    std_raises: Optional[Type[BaseException]]  # None: the standard library accepts it (see `why`)
    why: str = ""
    does_io: bool = False  # the row starts a request first (timeouts are checked on its future)


def _cf_future() -> concurrent.futures.Future:
    return concurrent.futures.Future()


TABLE = [
    # -- offsets: os.pread / os.pwrite / os.lseek
    Row("pread offset float", lambda f, b: f.pread(b, offset=1.5), TypeError,
        lambda fd, io_: os.pread(fd, 1, 1.5), TypeError),
    Row("pread offset str", lambda f, b: f.pread(b, offset="5"), TypeError,
        lambda fd, io_: os.pread(fd, 1, "5"), TypeError),
    Row("pread offset None", lambda f, b: f.pread(b, offset=None), TypeError,
        lambda fd, io_: os.pread(fd, 1, None), TypeError),
    Row("pread offset numpy float", lambda f, b: f.pread(b, offset=np.float64(1)), TypeError,
        lambda fd, io_: os.pread(fd, 1, np.float64(1)), TypeError),
    Row("pread offset True", lambda f, b: f.pread(b, offset=True), TypeError,
        lambda fd, io_: os.pread(fd, 1, True), None, "bool as an int: refused on purpose"),
    Row("pwrite offset False", lambda f, b: f.pwrite(b, offset=False), TypeError,
        lambda fd, io_: os.lseek(fd, False, os.SEEK_SET), None, "bool as an int: refused on purpose"),
    Row("pread offset numpy bool", lambda f, b: f.pread(b, offset=np.True_), TypeError, None, None,
        "NumPy deprecates bools as indices; os.pread still takes them with a warning"),
    Row("pread offset -1", lambda f, b: f.pread(b, offset=-1), ferry.InvalidArgumentError,
        lambda fd, io_: os.pread(fd, 1, -1), OSError, "InvalidArgumentError is an OSError(EINVAL) too"),
    Row("pwrite offset -1", lambda f, b: f.pwrite(b, offset=-1), ferry.InvalidArgumentError,
        lambda fd, io_: os.pwrite(fd, b"x", -1), OSError),
    Row("pread offset 2**63", lambda f, b: f.pread(b, offset=BIG), OverflowError,
        lambda fd, io_: os.pread(fd, 1, BIG), OverflowError),
    Row("pread offset 2**64", lambda f, b: f.pread(b, offset=HUGE), OverflowError,
        lambda fd, io_: os.pread(fd, 1, HUGE), OverflowError),
    Row("pread offset -2**64", lambda f, b: f.pread(b, offset=-HUGE), OverflowError,
        lambda fd, io_: os.pread(fd, 1, -HUGE), OverflowError),
    Row("pread range past 2**63-1", lambda f, b: f.pread(b, offset=BIG - 5), ferry.InvalidArgumentError,
        lambda fd, io_: os.pread(fd, 10, BIG - 5), OSError),
    Row("pwrite range past 2**63-1", lambda f, b: f.pwrite(b, offset=BIG - 5), ferry.InvalidArgumentError,
        lambda fd, io_: os.pwrite(fd, b"0123456789", BIG - 5), OSError),
    # -- sizes: os.pread's n
    Row("pread size float", lambda f, b: f.pread(b, size=1.5), TypeError,
        lambda fd, io_: os.pread(fd, 1.5, 0), TypeError),
    Row("pread size str", lambda f, b: f.pread(b, size="5"), TypeError,
        lambda fd, io_: os.pread(fd, "5", 0), TypeError),
    Row("pread size True", lambda f, b: f.pread(b, size=True), TypeError,
        lambda fd, io_: os.pread(fd, True, 0), None, "bool as an int: refused on purpose"),
    Row("pread size -1", lambda f, b: f.pread(b, size=-1), ferry.InvalidArgumentError,
        lambda fd, io_: os.pread(fd, -1, 0), OSError),
    Row("pread size 2**63", lambda f, b: f.pread(b, size=BIG), OverflowError,
        lambda fd, io_: os.pread(fd, BIG, 0), OverflowError),
    Row("pread size 2**64", lambda f, b: f.pread(b, size=HUGE), OverflowError,
        lambda fd, io_: os.pread(fd, HUGE, 0), OverflowError),
    Row("pread size past the buffer", lambda f, b: f.pread(b, size=11), ferry.InvalidBufferError, None, None,
        "readinto() has no size: the standard library cannot ask for more than the buffer holds"),
    Row("readinto size float", lambda f, b: f.readinto(b, 2.0), TypeError,
        lambda fd, io_: os.read(fd, 2.0), TypeError),
    Row("write size -3", lambda f, b: f.write(b, -3), ferry.InvalidArgumentError,
        lambda fd, io_: os.pread(fd, -3, 0), OSError),
    Row("read(buf, size=2**64)", lambda f, b: f.read(b, HUGE), OverflowError,
        lambda fd, io_: os.read(fd, HUGE), OverflowError),
    # -- read(n): io's BufferedReader.read
    Row("read(1.5)", lambda f, b: f.read(1.5), TypeError, lambda fd, io_: io_.read(1.5), TypeError),
    Row("read('5')", lambda f, b: f.read("5"), TypeError, lambda fd, io_: io_.read("5"), TypeError),
    Row("read(True)", lambda f, b: f.read(True), TypeError, lambda fd, io_: io_.read(True), None,
        "bool as an int: refused on purpose"),
    Row("read(-2)", lambda f, b: f.read(-2), ValueError, lambda fd, io_: io_.read(-2), ValueError),
    Row("read(2**63)", lambda f, b: f.read(BIG), OverflowError, lambda fd, io_: io_.read(BIG), OverflowError),
    Row("read(2**64)", lambda f, b: f.read(HUGE), OverflowError, lambda fd, io_: io_.read(HUGE), OverflowError),
    Row("read(n, size)", lambda f, b: f.read(5, 5), TypeError, lambda fd, io_: io_.read(5, 5), TypeError),
    # -- buffers
    Row("pread into str", lambda f, b: f.pread("text"), TypeError, lambda fd, io_: io_.readinto("text"), TypeError),
    Row("write a float", lambda f, b: f.write(1.5), TypeError, lambda fd, io_: os.write(fd, 1.5), TypeError),
    # -- timeouts: concurrent.futures.Future.result / threading waits
    Row("result(timeout='1')", lambda f, b: f.pread(b).result(timeout="1"), TypeError,
        lambda fd, io_: _cf_future().result(timeout="1"), TypeError, does_io=True),
    Row("wait(timeout=[1])", lambda f, b: f.pread(b).wait([1]), TypeError,
        lambda fd, io_: threading.Event().wait([1]), TypeError, does_io=True),
    Row("wait(timeout=False)", lambda f, b: f.pread(b).wait(False), TypeError,
        lambda fd, io_: threading.Event().wait(False), None, "bool as a number: refused on purpose", does_io=True),
    Row("exception(timeout=nan)", lambda f, b: f.pread(b).exception(timeout=math.nan), ValueError,
        lambda fd, io_: threading.Lock().acquire(timeout=math.nan), ValueError, does_io=True),
]


def _ids(rows):
    return [r.what for r in rows]


@pytest.fixture
def hundred(make_file):
    path, _ = make_file(100)
    return path


@pytest.mark.parametrize("row", TABLE, ids=_ids(TABLE))
def test_ferry_refuses_like_the_standard_library(hundred, row):
    before = hundred.read_bytes()
    with ferry.open(hundred, "r+") as f:
        with pytest.raises(row.ferry_raises):
            row.ferry_call(f, bytearray(10))
        if not row.does_io:
            assert f.report()["total_ops"] == 0, "a refused call must not do I/O"
    assert hundred.read_bytes() == before


_STD_ROWS = [r for r in TABLE if r.std_call is not None]


@pytest.mark.parametrize("row", _STD_ROWS, ids=_ids(_STD_ROWS))
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_standard_library_column_is_true(hundred, row):
    fd = os.open(hundred, os.O_RDWR)
    try:
        with open(hundred, "rb") as io_:
            if row.std_raises is None:
                assert row.why, "a row where the standard library accepts the call says why Ferry refuses it"
                row.std_call(fd, io_)  # accepted
            else:
                with pytest.raises(row.std_raises):
                    row.std_call(fd, io_)
    finally:
        os.close(fd)


def test_offset_errors_are_value_errors_and_os_errors_with_einval(hundred):
    with ferry.open(hundred) as f:
        with pytest.raises(ferry.InvalidArgumentError) as info:
            f.pread(bytearray(10), offset=-1)
    e = info.value
    assert isinstance(e, ValueError) and isinstance(e, OSError)
    assert e.errno == errno.EINVAL
    assert e.code == "invalid_argument"
    assert "offset must not be negative" in str(e)
    assert e.filename == str(hundred)


def test_range_past_the_largest_offset_is_refused_at_the_call_not_in_result(hundred):
    with ferry.open(hundred, "r+") as f:
        with pytest.raises(ferry.InvalidArgumentError, match="largest file offset"):
            f.pwrite(b"0123456789", offset=BIG - 5)
        # The largest range that fits is accepted (and reads nothing: it is past the end).
        assert f.pread(bytearray(10), offset=BIG - 11).result() == 0


def test_numpy_integers_are_accepted_as_offsets_and_sizes(make_file):
    path, data = make_file(100)
    with ferry.open(path) as f:
        out = bytearray(10)
        assert f.pread(out, offset=np.int64(5), size=np.uint8(10)).result() == 10
        assert bytes(out) == data[5:15].tobytes()
        assert f.read(np.int32(3)) == data[:3].tobytes()


@pytest.mark.parametrize("call, kvikio_form", [
    (lambda f, b: f.pread(b, 100, 0), "CuFile.pread(buf, size, file_offset)"),
    (lambda f, b: f.pread(b, 4), "CuFile.pread(buf, size, file_offset)"),
    (lambda f, b: f.pwrite(b, 4, 0), "CuFile.pwrite(buf, size, file_offset)"),
    (lambda f, b: f.read_async(b, 4, stream=0), "CuFile.raw_read_async(buf, stream, size, file_offset)"),
    (lambda f, b: f.write_async(b, 0, 4, stream=0), "CuFile.raw_write_async(buf, stream, size, file_offset)"),
])
def test_offset_and_size_are_keywords_only_and_the_error_names_kvikios_order(make_file, call, kvikio_form):
    # Issue 48 (B7): `f.pread(buf, 100, 0)`, KvikIO's (buf, size, file_offset), read 0 bytes at offset 100
    # without a word. Every positional form is refused before any I/O, the buffer untouched.
    path, _ = make_file(200)
    out = np.full(100, 0xEE, dtype=np.uint8)
    with ferry.open(path, "r+") as f:
        with pytest.raises(TypeError) as info:
            call(f, out)
        assert f.report()["total_ops"] == 0
    message = str(info.value)
    assert "offset=..., size=..." in message and "keywords only" in message
    assert "KvikIO's order is (buf, size, file_offset)" in message and kvikio_form in message
    assert "ferry.kvikio" in message
    assert (out == 0xEE).all()


# ---- paths: io.open / os.open


class _PathLike:
    def __init__(self, value):
        self.value = value

    def __fspath__(self):
        return self.value


PATH_TABLE = [
    # (what, path, Ferry raises, open() raises)
    ("embedded NUL in str", "a\0b", ValueError, ValueError),
    ("embedded NUL in bytes", b"a\0b", ValueError, ValueError),
    ("PathLike returning an int", _PathLike(5), TypeError, TypeError),
    ("PathLike returning NUL", _PathLike("a\0b"), ValueError, ValueError),
    ("float", 1.5, TypeError, TypeError),
    ("bytearray", bytearray(b"x"), TypeError, TypeError),
    ("empty path", "", FileNotFoundError, FileNotFoundError),
    ("None", None, TypeError, TypeError),
]


@pytest.mark.parametrize("what,path,ferry_raises,open_raises", PATH_TABLE, ids=[r[0] for r in PATH_TABLE])
def test_paths_are_refused_like_open_refuses_them(what, path, ferry_raises, open_raises):
    with pytest.raises(ferry_raises):
        ferry.open(path)
    with pytest.raises(open_raises):
        open(path, "rb")  # noqa: SIM115 (the comparison)
    if path not in (None, ""):  # for doctor() these mean "no file": it checks the platform alone
        with pytest.raises(ferry_raises):
            ferry.doctor(path)


def test_a_file_descriptor_is_not_a_path(make_file):
    # io.open takes descriptors (and True as descriptor 1); Ferry opens paths only, as os.open does.
    path, _ = make_file(10)
    fd = os.open(path, os.O_RDONLY)
    try:
        for value in (fd, True):
            with pytest.raises(TypeError, match="file descriptors"):
                ferry.open(value)
            with pytest.raises(TypeError):
                os.open(value, os.O_RDONLY)
    finally:
        os.close(fd)


def test_a_nul_in_a_path_never_opens_the_prefix(tmp_path):
    # Before: "a\0b" reached open(2) as "a", opening (or creating) another file than the one named.
    (tmp_path / "a").write_bytes(b"prefix")
    with pytest.raises(ValueError, match="embedded null byte"):
        ferry.open(str(tmp_path / "a") + "\0b")
    with pytest.raises(ValueError, match="embedded null byte"):
        ferry.open(str(tmp_path / "new") + "\0b", "w")
    assert not (tmp_path / "new").exists()
    assert (tmp_path / "a").read_bytes() == b"prefix"


def test_bytes_and_undecodable_paths_round_trip(tmp_path):
    name = os.fsencode(str(tmp_path)) + b"/caf\xe9.bin"  # not UTF-8: only os.fsencode/fsdecode round-trip it
    with open(name, "wb") as out:
        out.write(b"data")
    for p in (name, os.fsdecode(name), Path(os.fsdecode(name))):
        with ferry.open(p) as f:
            assert f.read() == b"data"
            assert f.path == os.fsdecode(name)
    with pytest.raises(FileNotFoundError) as info:
        ferry.open(name + b".missing")
    assert info.value.filename == os.fsdecode(name + b".missing")


MODE_TABLE = [
    ("int mode", 5, TypeError, TypeError),
    ("NUL in mode", "r\0", ValueError, ValueError),
    ("unknown mode", "rr", ValueError, ValueError),
]


@pytest.mark.parametrize("what,mode,ferry_raises,open_raises", MODE_TABLE, ids=[r[0] for r in MODE_TABLE])
def test_modes_are_refused_like_open_refuses_them(make_file, what, mode, ferry_raises, open_raises):
    path, _ = make_file(10)
    with pytest.raises(ferry_raises):
        ferry.open(path, mode)
    with pytest.raises(open_raises):
        open(path, mode)  # noqa: SIM115


# ---- settings, sizes, doctor


SETTING_TABLE = [
    # (setting, value, raises)
    ("task_size", 1.5, TypeError),
    ("task_size", True, TypeError),
    ("task_size", None, TypeError),
    ("task_size", -1, ValueError),
    ("task_size", HUGE, OverflowError),
    ("task_size", "4MiB\0junk", ValueError),
    ("task_size", "lots", ValueError),
    ("threads", 0, ValueError),
    ("threads", 2.0, TypeError),
    ("compat_mode", 1, TypeError),
    ("compat_mode", "sometimes", ValueError),
    ("direct_io", "on\0", ValueError),
]


@pytest.mark.parametrize("name,value,raises", SETTING_TABLE, ids=[f"{n}={v!r}" for n, v, _ in SETTING_TABLE])
def test_settings_are_checked_by_every_setter(make_file, name, value, raises):
    path, _ = make_file(10)
    before = ferry.config.as_dict()
    with pytest.raises(raises):
        setattr(ferry.config, name, value)
    with pytest.raises(raises):
        ferry.config.update(**{name: value})
    with pytest.raises(raises):
        with ferry.config.override(**{name: value}):
            pass
    with pytest.raises(raises):
        ferry.open(path, **{name: value})
    assert ferry.config.as_dict() == before


def test_settings_still_take_ints_size_strings_and_bools(make_file):
    path, _ = make_file(10)
    ferry.config.task_size = np.int64(8192)
    assert ferry.config.task_size == 8192
    ferry.config.update(task_size="1MiB", direct_io=False, compat_mode="on")
    assert ferry.config.task_size == 1 << 20 and ferry.config.direct_io == "off"
    with ferry.open(path, direct_io=True, threads=2) as f:
        assert f.config["direct_io"] == "on" and f.config["threads"] == 2


@pytest.mark.parametrize("value,raises", [
    (1.5, TypeError), (True, TypeError), (None, TypeError), (b"4k", TypeError), (-1, ValueError),
    (HUGE, OverflowError), ("4k\0", ValueError), ("lots", ValueError),
])
def test_parse_size_refuses(value, raises):
    with pytest.raises(raises):
        ferry.parse_size(value)


@pytest.mark.parametrize("value,raises", [
    (1.5, TypeError), (True, TypeError), ("5", TypeError), (-1, ValueError), (HUGE, OverflowError),
])
def test_format_size_refuses(value, raises):
    with pytest.raises(raises):
        ferry.format_size(value)


def test_parse_and_format_size_still_work():
    assert ferry.parse_size("4MiB") == 4 << 20
    assert ferry.parse_size(np.uint32(7)) == 7
    assert ferry.format_size(1 << 30) == "1.00 GiB"
    assert ferry.format_size(2**64 - 1)


@pytest.mark.parametrize("kwargs,raises", [
    ({"device": 1.5}, TypeError), ({"device": "0"}, TypeError), ({"device": True}, TypeError),
    ({"device": -1}, ValueError), ({"device": 2**31}, OverflowError), ({"path": 3}, TypeError),
    ({"path": "x\0y"}, ValueError),
])
def test_doctor_refuses(kwargs, raises):
    with pytest.raises(raises):
        ferry.doctor(**kwargs)


def test_timeouts_like_concurrent_futures(make_file):
    path, _ = make_file(4096)
    with ferry.open(path) as f:
        fut = f.pread(bytearray(4096))
        for t in (None, 0, -1, 0.0, 1, 1e300, math.inf, np.float32(0.5)):
            assert fut.wait(t) in (True, False)
        fut.result()
        assert fut.result(timeout=-5) == 4096  # done: a zero or negative timeout does not wait, and need not
        assert fut.exception(timeout=math.inf) is None
