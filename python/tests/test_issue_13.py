"""Issue 13 on the CPU: Future.bytes_done and progress, File.seek/tell/fileno, ferry.page_cache, and the
argument handling of the stream-ordered calls (their GPU behaviour is in test_issue_13_gpu.py)."""

from __future__ import annotations

import os
import sys
import types

import numpy as np
import pytest

import ferry


# ---- progress


def test_bytes_done_is_the_total_once_done(make_file):
    path, data = make_file(3 * 65536 + 7)
    with ferry.open(path, task_size="64KiB") as f:
        fut = f.pread(np.empty(data.size, np.uint8))
        assert fut.result() == data.size
        assert fut.bytes_done == data.size


def test_read_calls_progress_with_done_and_total(make_file):
    path, data = make_file(5 * 65536 + 3)
    calls = []
    with ferry.open(path, task_size="64KiB") as f:
        out = np.empty(data.size, np.uint8)
        assert f.read(out, progress=lambda done, total: calls.append((done, total))) == data.size
        assert f.tell() == data.size
        assert f.last_report["total_bytes"] == data.size
    assert np.array_equal(out, data)
    assert calls, "progress was never called"
    assert calls[-1] == (data.size, data.size)
    assert all(total == data.size for _, total in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_read_n_with_progress_returns_bytes(make_file):
    path, data = make_file(100_000)
    seen = []
    with ferry.open(path) as f:
        f.seek(10)
        got = f.read(1000, progress=lambda d, t: seen.append(t))
    assert got == data[10:1010].tobytes()
    assert seen and seen[-1] == 1000


def test_an_exception_from_progress_cancels_the_read_and_propagates(make_file):
    path, data = make_file(4 * 65536)

    def boom(done, total):
        raise RuntimeError("stop")

    with ferry.open(path, task_size="64KiB") as f:
        with pytest.raises(RuntimeError, match="stop"):
            f.read(np.empty(data.size, np.uint8), progress=boom)
        # A read cancelled in time leaves the position where it began; one that had already finished
        # (this file is small) moved it past what it read.
        assert f.tell() in (0, data.size)


def test_progress_true_uses_tqdm_when_importable(make_file, monkeypatch):
    path, data = make_file(2 * 65536)
    updates = []

    class FakeTqdm:
        def __init__(self, total, **kwargs):
            self.total = total
            self.closed = False

        def update(self, n):
            updates.append(n)

        def close(self):
            self.closed = True

    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = FakeTqdm
    pkg = types.ModuleType("tqdm")
    pkg.auto = auto
    monkeypatch.setitem(sys.modules, "tqdm", pkg)
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    with ferry.open(path) as f:
        f.read(np.empty(data.size, np.uint8), progress=True)
    assert sum(updates) == data.size


def test_progress_true_without_tqdm_still_reads(make_file, monkeypatch):
    path, data = make_file(65536)
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import fails
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with ferry.open(path) as f:
        out = np.empty(data.size, np.uint8)
        assert f.read(out, progress=True) == data.size
    assert np.array_equal(out, data)


def test_write_calls_progress_too(tmp_path):
    path = tmp_path / "w.bin"
    data = np.arange(300_000, dtype=np.uint32).view(np.uint8)
    calls = []
    with ferry.open(path, "w", task_size="64KiB") as f:
        assert f.write(data, progress=lambda d, t: calls.append((d, t))) == data.size
        assert f.tell() == data.size
    assert calls[-1] == (data.size, data.size)
    assert path.read_bytes() == data.tobytes()


def test_progress_of_a_wrong_type_is_a_type_error(make_file):
    path, _ = make_file(10)
    with ferry.open(path) as f:
        with pytest.raises(TypeError, match="progress"):
            f.read(np.empty(10, np.uint8), progress="yes")


# ---- seek, tell, fileno


def test_seek_and_tell_follow_io_semantics(make_file):
    path, data = make_file(1000)
    with ferry.open(path) as f:
        assert f.tell() == 0
        assert f.read(10) == data[:10].tobytes()
        assert f.tell() == 10
        assert f.seek(100) == 100
        assert f.read(5) == data[100:105].tobytes()
        assert f.seek(-5, os.SEEK_CUR) == 100
        assert f.seek(-10, os.SEEK_END) == 990
        assert f.read() == data[990:].tobytes()
        assert f.seek(5000) == 5000
        assert f.read(10) == b""
        with pytest.raises(ValueError, match="negative seek position"):
            f.seek(-1)
        with pytest.raises(ValueError, match="whence"):
            f.seek(0, 7)
        with pytest.raises(TypeError):
            f.seek(1.5)
        # pread neither uses nor moves the position
        f.seek(3)
        f.pread(np.empty(4, np.uint8), offset=500).result()
        assert f.tell() == 3
        assert f.seekable() and f.readable() and not f.writable()


def test_seek_then_write_lands_there(tmp_path):
    path = tmp_path / "w.bin"
    with ferry.open(path, "w") as f:
        f.write(b"a" * 100)
        f.seek(10)
        f.write(b"XYZ")
        assert f.tell() == 13
    assert path.read_bytes() == b"a" * 10 + b"XYZ" + b"a" * 87


def test_append_mode_still_appends_after_a_seek(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"12345")
    with ferry.open(path, "a") as f:
        assert f.tell() == 5
        f.seek(0)
        f.write(b"678")
        assert f.tell() == 8
    assert path.read_bytes() == b"12345678"


def test_fileno_is_the_files_descriptor(make_file):
    path, data = make_file(1234)
    with ferry.open(path) as f:
        fd = f.fileno()
        assert os.fstat(fd).st_size == 1234
        assert os.fstat(fd).st_ino == os.stat(path).st_ino
    with pytest.raises(ValueError, match="closed"):
        f.fileno()
    with pytest.raises(ValueError, match="closed"):
        f.tell()


# ---- page cache


def test_page_cache_residency_of_a_file_just_written(make_file):
    path, data = make_file(10 * 4096 + 1)
    r = ferry.page_cache.residency(path)
    assert r.range_bytes == data.size
    assert r.cached_bytes == data.size
    assert r.fraction == 1.0
    assert r.method in ("cachestat", "mincore")
    assert ferry.page_cache.cached_bytes(path, 4096, 4096) == 4096
    assert ferry.page_cache.residency(path, 1 << 40).range_bytes == 0


def test_page_cache_evict_returns_what_stays(make_file):
    path, data = make_file(32 * 4096)
    r = ferry.page_cache.evict(path)
    assert r.range_bytes == data.size
    assert 0 <= r.cached_bytes <= data.size


def test_page_cache_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        ferry.page_cache.residency(tmp_path / "missing")
    with pytest.raises(ferry.InvalidArgumentError, match="not a regular file"):
        ferry.page_cache.residency(tmp_path)
    with pytest.raises(TypeError):
        ferry.page_cache.residency(5)


# ---- stream-ordered calls, argument handling (no GPU needed)


def test_read_async_refuses_what_is_not_a_stream(make_file):
    path, _ = make_file(16)
    with ferry.open(path) as f:
        for bad in ("0", 1.5, True, None, -1):
            with pytest.raises((TypeError, ValueError)):
                f.read_async(np.empty(16, np.uint8), stream=bad)


def test_read_async_without_a_stream_argument_is_a_type_error(make_file):
    path, _ = make_file(16)
    with ferry.open(path) as f:
        with pytest.raises(TypeError):
            f.read_async(np.empty(16, np.uint8))  # stream is keyword-only and required


def test_read_async_without_cuda_reports_in_its_future(make_file):
    from ferry._ferry import cuda_driver_error

    if cuda_driver_error() is None:
        pytest.skip("a CUDA driver is usable here: covered by test_issue_13_gpu.py")
    path, _ = make_file(16)
    with ferry.open(path) as f:
        fut = f.read_async(np.empty(16, np.uint8), stream=0)
        with pytest.raises(ferry.UnavailableError, match="stream-ordered read"):
            fut.result()
