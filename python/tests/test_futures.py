"""Futures: result/done/wait/exception/report, timeouts, lifetime, asyncio, and the GIL."""

from __future__ import annotations

import asyncio
import errno
import gc
import os
import threading
import time

import numpy as np
import pytest

import ferry


def test_result_done_wait(make_file):
    path, data = make_file(3 << 20)
    with ferry.open(path, task_size="256KiB") as f:
        out = np.empty(data.size, dtype=np.uint8)
        fut = f.pread(out)
        assert fut.wait() is True
        assert fut.done() is True
        assert fut.wait(timeout=0) is True
        assert fut.result() == data.size
        assert fut.result() == data.size  # cached: any number of times
        assert fut.result(timeout=1.0) == data.size
        assert fut.exception() is None
        assert "done" in repr(fut) and "pread" in repr(fut)
    assert np.array_equal(out, data)


def test_future_report_counts_the_request_only(make_file):
    path, _ = make_file(1 << 20)
    with ferry.open(path, task_size="64KiB") as f:
        f.pread(bytearray(1 << 20)).result()  # an earlier request must not appear in the next report
        fut = f.pread(bytearray(256 * 1024))
        report = fut.report
    assert report["total_ops"] == 4
    assert report["total_bytes"] == 256 * 1024
    assert report.routes_used == {"host": 4}


def test_failed_request_raises_from_result_and_exception(make_file):
    path, _ = make_file(100)
    with ferry.open(path) as f:
        fut = f.pwrite(b"abc")  # opened for reading: the request fails, the call itself does not
        exc = fut.exception()
        assert isinstance(exc, ferry.FerryError)
        assert exc.code == "failed_precondition"
        with pytest.raises(ferry.FerryError, match="opened for reading only"):
            fut.result()
        with pytest.raises(ferry.FerryError):
            fut.report


def test_dropping_a_pending_future_is_safe(make_file):
    path, data = make_file(8 << 20)
    with ferry.open(path, task_size="64KiB") as f:
        for _ in range(20):
            f.pread(np.empty(data.size, dtype=np.uint8))  # future and buffer dropped at once
            gc.collect()
        out = np.empty(data.size, dtype=np.uint8)
        f.pread(out).result()
    assert np.array_equal(out, data)


def test_the_future_keeps_the_buffer_alive(make_file):
    path, data = make_file(4 << 20)
    with ferry.open(path, task_size="64KiB") as f:
        out = np.empty(data.size, dtype=np.uint8)
        view = memoryview(out)
        fut = f.pread(view)
        del view
        gc.collect()
        assert fut.result() == data.size
    assert np.array_equal(out, data)


def test_close_waits_for_outstanding_futures(make_file):
    path, data = make_file(8 << 20)
    out = np.empty(data.size, dtype=np.uint8)
    f = ferry.open(path, task_size="64KiB")
    fut = f.pread(out)
    f.close()
    assert fut.done()
    assert fut.result() == data.size
    assert np.array_equal(out, data)


def test_operations_on_a_closed_file_raise_value_error(make_file):
    path, _ = make_file(100)
    f = ferry.open(path)
    f.close()
    for call in (lambda: f.read(10), lambda: f.pread(bytearray(1)), lambda: f.write(b"x"), f.size, f.sync):
        with pytest.raises(ValueError, match="closed file"):
            call()
    assert f.report()["total_ops"] == 0  # the report stays readable


def test_await_a_future(make_file):
    path, data = make_file(1 << 20)

    async def main() -> int:
        with ferry.open(path) as f:
            out = np.empty(data.size, dtype=np.uint8)
            n = await f.pread(out)
            assert np.array_equal(out, data)
            return n

    assert asyncio.run(main()) == data.size


def test_wait_with_timeout_returns_a_bool(make_file):
    path, _ = make_file(1 << 20)
    with ferry.open(path) as f:
        fut = f.pread(bytearray(1 << 20))
        assert fut.wait(timeout=30.0) is True
        assert fut.done()


def test_the_gil_is_released_while_ferry_blocks(tmp_path):
    # A blocking read on one thread must leave the interpreter to the others: the main thread keeps
    # running Python code throughout, so the longest pause it sees is far shorter than the read.
    path = tmp_path / "big.bin"
    size = 192 << 20
    with open(path, "wb") as out:
        out.write(os.urandom(1 << 20) * (size >> 20))
    f = ferry.open(path, "r", threads=1, task_size="1MiB", direct_io="off")
    buf = bytearray(size)
    timing = {}

    def reader():
        start = time.perf_counter()
        f.readinto(buf)
        timing["read"] = time.perf_counter() - start

    t = threading.Thread(target=reader)
    last = time.perf_counter()
    longest = 0.0
    t.start()
    while t.is_alive():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    t.join()
    f.close()
    if timing["read"] < 0.05:
        pytest.skip(f"the read took {timing['read'] * 1000:.1f} ms: too short to tell")
    assert longest < timing["read"] / 2, (longest, timing["read"])


def test_opening_a_fifo_fails_at_once_instead_of_hanging(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    for mode in ("r", "r+"):
        with pytest.raises(OSError) as raised:
            ferry.open(fifo, mode)
        assert "FIFO" in str(raised.value)
        assert raised.value.errno == errno.ESPIPE
    assert time.monotonic() - start < 5
