"""File.pread_batch (issue 21): the data-loader form and the pieces form, into host memory here and into
GPU memory where CuPy or PyTorch finds one; bad pieces refused before any I/O, naming their index."""

from __future__ import annotations

import numpy as np
import pytest

import ferry

SIZE = 3 * 1024 * 1024 + 123


def test_the_data_loader_form_lands_piece_i_at_row_i(make_file):
    path, data = make_file(SIZE, seed=31)
    rng = np.random.default_rng(3)
    offsets = rng.integers(0, SIZE - 4096, 2000)
    dst = np.full(2000 * 4096 + 16, 0xA5, dtype=np.uint8)
    with ferry.open(path) as f:
        fut = f.pread_batch(dst, offsets, 4096)
        assert fut.result() == 2000 * 4096
        assert fut.report["routes"]["host"]["ops"] == 2000
    for i, o in enumerate(offsets):
        assert np.array_equal(dst[i * 4096:(i + 1) * 4096], data[o:o + 4096]), f"piece {i}"
    assert (dst[2000 * 4096:] == 0xA5).all(), "bytes past the last piece changed"


def test_the_pieces_form_with_sizes_past_the_end_and_empty_pieces(make_file):
    path, data = make_file(SIZE, seed=32)
    a = np.zeros(100, dtype=np.uint8)
    b = np.full(5000, 0x11, dtype=np.uint8)
    c = np.zeros(10, dtype=np.uint8)
    with ferry.open(path) as f:
        n = f.pread_batch([(a, 5), (b, SIZE - 1000), (c, 0, 0)]).result()
    assert n == 100 + 1000
    assert np.array_equal(a, data[5:105])
    assert np.array_equal(b[:1000], data[SIZE - 1000:])
    assert (b[1000:] == 0x11).all(), "a piece past the end of the file wrote past the data"
    assert (c == 0).all()


def test_bad_pieces_are_refused_before_any_io_naming_the_index(make_file):
    path, _ = make_file(SIZE, seed=33)
    dst = np.zeros(4 * 4096, dtype=np.uint8)
    with ferry.open(path) as f:
        with pytest.raises(ferry.InvalidArgumentError, match="piece 2"):
            f.pread_batch(dst, [0, 4096, -5, 0], 4096)
        with pytest.raises(ferry.InvalidBufferError):
            f.pread_batch(dst, [0, 1, 2, 3, 4], 4096)  # five pieces do not fit in four rows
        with pytest.raises(TypeError, match="piece 1"):
            f.pread_batch([(dst, 0), "nonsense"])
        with pytest.raises(TypeError):
            f.pread_batch(dst, np.zeros((2, 2), dtype=np.int64), 4096)
    assert (dst == 0).all()


def poisoned_gpu_bytes(framework, request, n):
    """`n` bytes of 0xA5 in GPU memory of `framework` (cupy or torch), and a function that copies them back."""
    if framework == "cupy":
        cp = request.getfixturevalue("cp")
        dst = cp.full(n, 0xA5, dtype=cp.uint8)
        return dst, lambda: cp.asnumpy(dst)
    torch = request.getfixturevalue("torch_cuda")
    dst = torch.full((n,), 0xA5, dtype=torch.uint8, device="cuda")
    return dst, lambda: dst.cpu().numpy()


@pytest.mark.parametrize("framework", ["cupy", "torch"])
def test_into_gpu_memory_every_byte_and_the_bytes_around(make_file, framework, request):
    path, data = make_file(SIZE, seed=34)
    offsets = np.random.default_rng(4).integers(0, SIZE, 3000)
    size = 1000  # unaligned, some pieces past the end of the file
    dst, host = poisoned_gpu_bytes(framework, request, 3000 * size + 64)
    with ferry.open(path) as f:
        fut = f.pread_batch(dst, offsets, size)
        want = sum(min(size, max(0, SIZE - int(o))) for o in offsets)
        assert fut.result() == want
        report = fut.report
    got = host()
    for i, o in enumerate(offsets):
        n = min(size, max(0, SIZE - int(o)))
        assert np.array_equal(got[i * size:i * size + n], data[o:o + n]), f"piece {i}"
        assert (got[i * size + n:(i + 1) * size] == 0xA5).all(), f"piece {i} wrote past the file's end"
    assert (got[3000 * size:] == 0xA5).all()
    assert report["routes"]["staged"]["ops"] == sum(1 for o in offsets if o < SIZE)


@pytest.mark.parametrize("framework", ["cupy", "torch"])
def test_gpu_pieces_in_buffers_of_their_own_land_exactly(make_file, framework, request):
    """Pieces whose destinations do not follow one another (listed in reverse, gaps between): on the GPU a
    fill's pieces go to the driver as one batched copy; every byte lands, none around them changes."""
    path, data = make_file(SIZE, seed=35)
    rng = np.random.default_rng(5)
    count, stride = 1500, 5000
    sizes = rng.integers(1, 4800, count)
    offsets = rng.integers(0, SIZE, count)
    dst, host = poisoned_gpu_bytes(framework, request, count * stride)
    order = list(reversed(range(count)))
    pieces = [(dst[i * stride:i * stride + int(sizes[i])], int(offsets[i])) for i in order]
    lengths = [min(int(sizes[i]), max(0, SIZE - int(offsets[i]))) for i in range(count)]
    with ferry.open(path) as f:
        assert f.pread_batch(pieces).result() == sum(lengths)
    got = host()
    for i in range(count):
        o, n = int(offsets[i]), lengths[i]
        assert np.array_equal(got[i * stride:i * stride + n], data[o:o + n]), f"piece {i}"
        assert (got[i * stride + n:(i + 1) * stride] == 0xA5).all(), f"bytes after piece {i} changed"
