"""Reads and writes with host buffers (NumPy, bytes, bytearray, memoryview): byte-exact, every API shape."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np
import pytest

import ferry

ODD_SIZE = 9 * 1024 * 1024 + 12345  # several tasks, a tail that is not 4 KiB aligned


def test_pread_whole_file_into_numpy_is_byte_exact(make_file):
    path, data = make_file(ODD_SIZE)
    with ferry.open(path) as f:
        assert f.size() == ODD_SIZE
        out = np.empty(ODD_SIZE, dtype=np.uint8)
        assert f.pread(out).result() == ODD_SIZE
    assert np.array_equal(out, data)


@pytest.mark.parametrize("direct_io", ["auto", "on", "off"])
@pytest.mark.parametrize("task_size", ["64KiB", "1MiB", "4MiB"])
def test_pread_every_direct_io_policy_and_task_size(make_file, direct_io, task_size):
    path, data = make_file(ODD_SIZE, seed=3)
    with ferry.open(path, direct_io=direct_io, task_size=task_size) as f:
        out = np.zeros(ODD_SIZE, dtype=np.uint8)
        assert f.pread(out).result() == ODD_SIZE
    assert np.array_equal(out, data)


def test_pread_at_offset_with_size_into_typed_array(make_file):
    path, data = make_file(1 << 20)
    with ferry.open(path) as f:
        out = np.zeros(1000, dtype=np.float32)  # 4000 bytes
        assert f.pread(out, offset=4096 + 7, size=3999).result() == 3999
    got = out.view(np.uint8)
    assert np.array_equal(got[:3999], data[4103:4103 + 3999])
    assert got[3999] == 0  # past the requested size: untouched


def test_pread_short_at_end_of_file_leaves_the_rest_untouched(make_file):
    path, data = make_file(10_000)
    with ferry.open(path) as f:
        out = np.full(8192, 0xAB, dtype=np.uint8)
        assert f.pread(out, offset=6000).result() == 4000
    assert np.array_equal(out[:4000], data[6000:])
    assert (out[4000:] == 0xAB).all()


def test_pread_past_end_of_file_reads_nothing(make_file):
    path, _ = make_file(100)
    with ferry.open(path) as f:
        assert f.pread(bytearray(10), offset=10**9).result() == 0


def test_zero_byte_requests(make_file):
    path, _ = make_file(100)
    with ferry.open(path, "r+") as f:
        assert f.pread(bytearray(0)).result() == 0
        assert f.pread(bytearray(10), size=0).result() == 0
        assert f.pwrite(b"").result() == 0
        assert f.read(0) == b""


def test_read_advances_the_position(make_file):
    path, data = make_file(50_000)
    with ferry.open(path) as f:
        a = bytearray(10_000)
        assert f.read(a) == 10_000
        b = np.empty(10_000, dtype=np.uint8)
        assert f.readinto(b) == 10_000
        c = f.read(5)
        rest = f.read()
    assert bytes(a) == data[:10_000].tobytes()
    assert np.array_equal(b, data[10_000:20_000])
    assert c == data[20_000:20_005].tobytes()
    assert rest == data[20_005:].tobytes()


def test_read_with_size_fills_part_of_the_buffer(make_file):
    path, data = make_file(4096)
    with ferry.open(path) as f:
        buf = bytearray(100)
        assert f.read(buf, 10) == 10
        assert f.read(buf, 10) == 10
    assert bytes(buf[:10]) == data[10:20].tobytes()
    assert buf[10:] == bytearray(90)


def test_read_bytes_at_end_of_file_is_short_then_empty(make_file):
    path, data = make_file(1000)
    with ferry.open(path) as f:
        assert f.read(600) == data[:600].tobytes()
        assert f.read(600) == data[600:].tobytes()
        assert f.read(600) == b""
        assert f.read() == b""


def test_write_then_read_back_with_every_host_buffer_kind(tmp_path):
    path = tmp_path / "out.bin"
    parts = [
        b"bytes object;",
        bytearray(b"bytearray;"),
        memoryview(b"0123memoryview;")[4:],
        np.arange(1000, dtype=np.int32),
        np.arange(12, dtype=np.float64).reshape(3, 4),
        np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),  # F-contiguous is one block too
    ]
    expected = b"".join(memoryview(p).tobytes(order="A") for p in parts)
    with ferry.open(path, "w") as f:
        for p in parts:
            assert f.write(p) == memoryview(p).nbytes
        f.sync()
    assert path.read_bytes() == expected
    with ferry.open(path) as f:
        assert f.read() == expected


def test_pwrite_at_offsets_and_pread_them_back(tmp_path):
    path = tmp_path / "sparse.bin"
    rng = np.random.default_rng(7)
    blocks = {offset: rng.integers(0, 256, 300_001, dtype=np.uint8) for offset in (0, 5_000_000, 1_234_567)}
    with ferry.open(path, "w", task_size="128KiB") as f:
        futures = [f.pwrite(block, offset=offset) for offset, block in blocks.items()]
        assert [fu.result() for fu in futures] == [300_001] * 3
        assert f.size() == 5_300_001
    with ferry.open(path) as f:
        for offset, block in blocks.items():
            out = np.empty_like(block)
            assert f.pread(out, offset=offset).result() == block.size
            assert np.array_equal(out, block)


def test_pwrite_with_size_writes_a_prefix(tmp_path):
    path = tmp_path / "p.bin"
    with ferry.open(path, "w") as f:
        assert f.pwrite(b"abcdefgh", size=3).result() == 3
    assert path.read_bytes() == b"abc"


def test_append_mode_appends(tmp_path):
    path = tmp_path / "log.bin"
    path.write_bytes(b"head;")
    with ferry.open(path, "a") as f:
        f.write(b"one;")
        f.write(np.frombuffer(b"two;", dtype=np.uint8))
    assert path.read_bytes() == b"head;one;two;"


def test_r_plus_reads_and_writes_an_existing_file(make_file):
    path, data = make_file(8192)
    with ferry.open(path, "r+") as f:
        f.pwrite(b"\x00" * 10, offset=100).result()
        out = bytearray(20)
        f.pread(out, offset=95).result()
    assert bytes(out) == data[95:100].tobytes() + b"\x00" * 10 + data[110:115].tobytes()


def test_w_truncates(make_file):
    path, _ = make_file(10_000)
    with ferry.open(path, "w") as f:
        assert f.size() == 0
        f.write(b"x")
    assert path.read_bytes() == b"x"


def test_binary_mode_letters_and_path_types(make_file):
    path, data = make_file(100)
    for p in (path, str(path), os.fsencode(path)):
        with ferry.open(p, "rb") as f:
            assert f.read() == data.tobytes()
            assert f.mode == "rb"
            assert f.path == str(path)
            assert f.name == str(path)


def test_read_into_mmap_and_write_from_mmap(make_file, tmp_path):
    path, data = make_file(65536)
    m = mmap.mmap(-1, 65536)
    with ferry.open(path) as f:
        assert f.read(m) == 65536
    assert m[:] == data.tobytes()
    out = tmp_path / "from_mmap.bin"
    with ferry.open(out, "w") as f:
        assert f.write(m) == 65536
    m.close()
    assert out.read_bytes() == data.tobytes()


def test_many_concurrent_requests_on_one_file(make_file):
    path, data = make_file(4 << 20, seed=11)
    chunk = 64 * 1024
    with ferry.open(path, task_size="16KiB") as f:
        outs = [np.empty(chunk, dtype=np.uint8) for _ in range(64)]
        futures = [f.pread(o, offset=i * chunk) for i, o in enumerate(outs)]
        assert all(fu.result() == chunk for fu in futures)
    assert np.array_equal(np.concatenate(outs), data)


def test_threads_share_a_file(make_file):
    import concurrent.futures as cf

    path, data = make_file(2 << 20, seed=5)
    with ferry.open(path) as f:
        def read_slice(i: int) -> bool:
            out = np.empty(256 * 1024, dtype=np.uint8)
            f.pread(out, offset=i * out.size).result()
            return bool(np.array_equal(out, data[i * out.size:(i + 1) * out.size]))

        with cf.ThreadPoolExecutor(8) as pool:
            assert all(pool.map(read_slice, range(8)))


def test_file_properties_and_repr(make_file):
    path, _ = make_file(10)
    f = ferry.open(path, threads=2)
    assert "open" in repr(f) and str(path) in repr(f)
    assert f.config["threads"] == 2
    assert isinstance(f.direct_io_available, bool)
    assert isinstance(f.direct_io_note, str)
    assert not f.closed
    f.close()
    f.close()  # twice is fine
    assert f.closed and "closed" in repr(f)


# ---- the file position of blocking read()/write(): kept as ferry::File keeps it (FileState::reserve and
# at_position), now that the blocking calls run on futures


def test_append_writes_land_after_bytes_added_since(tmp_path):
    path = tmp_path / "log.bin"
    path.write_bytes(b"head;")
    with ferry.open(path, "a") as f:
        f.write(b"one;")
        f.pwrite(b"PW;", offset=9).result()  # bytes added past the end by another route
        with open(path, "ab") as other:  # and by another writer
            other.write(b"OW;")
        f.write(b"two;")
    assert path.read_bytes() == b"head;one;PW;OW;two;"


def test_concurrent_blocking_reads_share_the_position_without_overlap(make_file):
    import concurrent.futures as cf

    size, chunk = 1 << 20, 4096
    path, data = make_file(size, seed=3)
    with ferry.open(path, task_size="4KiB") as f:
        def read_one(_: int) -> bytes:
            return f.read(chunk)

        with cf.ThreadPoolExecutor(8) as pool:
            pieces = list(pool.map(read_one, range(size // chunk)))
        assert f.read(1) == b""  # every byte was read exactly once: the position is at the end
    assert sorted(pieces) == sorted(data[i:i + chunk].tobytes() for i in range(0, size, chunk))


def test_a_failed_blocking_write_leaves_the_position(make_file):
    path, data = make_file(100)
    with ferry.open(path, "r") as f:
        assert f.read(10) == data[:10].tobytes()
        with pytest.raises(ferry.FerryError):
            f.write(b"abc")  # opened "r": fails
        assert f.read(10) == data[10:20].tobytes()  # the read position did not move


def test_a_short_read_ends_the_position_where_the_data_did(make_file):
    path, data = make_file(100)
    with ferry.open(path, "r+") as f:
        assert f.readinto(bytearray(60)) == 60
        assert f.readinto(bytearray(60)) == 40
        f.pwrite(b"more", offset=100).result()  # the file grows: the next read starts at 100, not 120
        assert f.read() == b"more"


# Issue 48 (11): read() of a file without a size (a /proc file, a character device) returned b"", though the
# docs say such files are read to their end: it is read in growing pieces until one comes back short.
def test_read_to_the_end_of_a_file_without_a_size():
    with open("/proc/self/status", "rb") as plain:
        want = plain.read()
    with ferry.open("/proc/self/status") as f:
        assert f.size() == 0
        got = f.read()
    # The file describes this process, whose values (its state, its memory) may change between the two reads:
    # compare the fields, line by line.
    def fields(text):
        return [line.split(b":")[0] for line in text.splitlines()]

    assert len(got) > 100 and fields(got) == fields(want)
    with ferry.open("/dev/zero") as f:
        assert f.read(100000) == bytes(100000)
