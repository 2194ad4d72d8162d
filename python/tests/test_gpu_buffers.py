"""GPU buffers: CuPy and PyTorch (CUDA Array Interface and DLPack), byte-exact, with route reports that
match the C++ CLI (`ferry read --device 0 --json`) for the same settings.

Every test here skips, saying why, when CuPy or PyTorch is not installed or no GPU is usable.
"""

from __future__ import annotations

import numpy as np
import pytest

import ferry
from conftest import cli_read, cli_read_report, route_signature

ODD_SIZE = 9 * 1024 * 1024 + 12345
DEVICE_ROUTES = {"nvfs", "p2p", "cufile-posix", "staged"}
CUFILE_ROUTES = {"nvfs", "p2p", "cufile-posix"}


def _reasons(report):
    return {r["reason"] for r in report["reasons"]}


# ---- CuPy


@pytest.mark.parametrize("compat_mode", ["on", "auto"])
def test_cupy_read_is_byte_exact(cp, make_file, compat_mode):
    path, data = make_file(ODD_SIZE, seed=21)
    with ferry.open(path, compat_mode=compat_mode, task_size="1MiB") as f:
        out = cp.empty(ODD_SIZE, dtype=cp.uint8)
        fut = f.pread(out)
        assert fut.result() == ODD_SIZE
        report = fut.report
    assert np.array_equal(cp.asnumpy(out), data)
    assert report["total_bytes"] == ODD_SIZE
    assert "host" not in report.routes_used
    assert set(report.routes_used) <= DEVICE_ROUTES
    if compat_mode == "on":
        assert report.routes_used == {"staged": report["total_ops"]}
        assert _reasons(report) == {"compat_mode_on"}


def test_cupy_read_with_blocking_read_and_config_override(cp, make_file):
    path, data = make_file(3 << 20, seed=4)
    with ferry.config.override(compat_mode="on"):
        with ferry.open(path) as f:
            out = cp.zeros((3 << 20) // 4, dtype=cp.float32)
            assert f.read(out) == 3 << 20
            assert f.last_report.routes_used == {"staged": f.last_report["total_ops"]}
    assert cp.asnumpy(out).tobytes() == data.tobytes()


@pytest.mark.parametrize("compat_mode", ["on", "auto", "off"])
def test_cupy_route_report_matches_the_cli(cp, make_file, compat_mode):
    path, data = make_file(ODD_SIZE, seed=22)
    settings = {"compat_mode": compat_mode, "task_size": "1MiB"}
    with ferry.open(path, **settings) as f:
        out = cp.empty(ODD_SIZE, dtype=cp.uint8)
        try:
            py = f.pread(out).report
        except OSError as e:  # compat off where cuFile cannot be used: the CLI must refuse as well
            assert compat_mode == "off", e
            rc, _, stderr = cli_read(path, settings, device=0)
            assert rc != 0, f"Python raised {e!r} but the CLI succeeded"
            assert getattr(e, "code", "") in stderr, (e, stderr)  # same error code, e.g. "unavailable: ..."
            return
    assert np.array_equal(cp.asnumpy(out), data)
    if compat_mode == "off":
        # cuFile's routes, and the unaligned last bytes (the file's end) through a bounce buffer.
        assert set(py.routes_used) <= CUFILE_ROUTES | {"staged"}
        assert {r["reason"] for r in py["reasons"] if r["route"] == "staged"} <= {"cufile_unaligned_edge"}
    cli = cli_read_report(path, settings, device=0)
    assert route_signature(py) == route_signature(cli)


def test_cupy_partial_read_at_offset_leaves_the_rest(cp, make_file):
    path, data = make_file(2 << 20, seed=5)
    with ferry.open(path, compat_mode="on") as f:
        out = cp.full(100_000, 7, dtype=cp.uint8)
        assert f.pread(out, offset=12345, size=99_000).result() == 99_000
    host = cp.asnumpy(out)
    assert np.array_equal(host[:99_000], data[12345:12345 + 99_000])
    assert (host[99_000:] == 7).all()


@pytest.mark.parametrize("compat_mode", ["on", "auto"])
def test_cupy_write_is_byte_exact(cp, tmp_path, compat_mode):
    data = cp.asarray(np.random.default_rng(9).integers(0, 256, ODD_SIZE, dtype=np.uint8))
    path = tmp_path / "from_gpu.bin"
    with ferry.open(path, "w", compat_mode=compat_mode, task_size="1MiB") as f:
        assert f.pwrite(data).result() == ODD_SIZE
        assert "host" not in f.report().routes_used
    assert path.read_bytes() == cp.asnumpy(data).tobytes()


def test_cupy_write_waits_for_the_producer_stream(cp, tmp_path):
    n = 64 << 20
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        a = cp.arange(n // 4, dtype=cp.int32) * 3  # queued on `stream`; exported with that stream
        path = tmp_path / "stream.bin"
        with ferry.open(path, "w", compat_mode="on") as f:
            f.write(a)
    expected = (np.arange(n // 4, dtype=np.int32) * 3).tobytes()
    assert path.read_bytes() == expected


def test_cupy_non_contiguous_is_refused(cp, make_file):
    path, _ = make_file(1 << 20)
    with ferry.open(path) as f:
        with pytest.raises(ferry.InvalidBufferError, match="not contiguous"):
            f.pread(cp.empty(1000, dtype=cp.uint8)[::2])
        assert f.report()["total_ops"] == 0


def test_cupy_through_dlpack_only(cp, make_file):
    path, data = make_file(1 << 20, seed=6)

    class OnlyDLPack:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    out = cp.empty(1 << 20, dtype=cp.uint8)
    with ferry.open(path, compat_mode="on") as f:
        assert f.pread(OnlyDLPack(out)).result() == 1 << 20
    assert np.array_equal(cp.asnumpy(out), data)


def test_dlpack_device_that_does_not_match_the_pointer_is_refused(cp, make_file):
    path, _ = make_file(4096)

    class Liar:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (2, 1 + self.a.device.id)  # claims another GPU than the one it is on

    with ferry.open(path) as f:
        with pytest.raises(ferry.InvalidBufferError, match="says it lives on cuda:"):
            f.pread(Liar(cp.empty(4096, dtype=cp.uint8)))
        assert f.report()["total_ops"] == 0


def test_pinned_host_memory_takes_the_host_route(cp, make_file):
    path, data = make_file(1 << 20, seed=7)
    pinned = cp.cuda.alloc_pinned_memory(1 << 20)
    out = np.frombuffer(pinned, dtype=np.uint8, count=1 << 20)
    with ferry.open(path) as f:
        report = f.pread(out).report
    assert np.array_equal(out, data)
    assert report.routes_used == {"host": report["total_ops"]}
    assert {r["detail"] for r in report["reasons"]} == {"host-pinned"}


def test_managed_memory_is_read_correctly(cp, make_file):
    path, data = make_file(1 << 20, seed=8)
    mem = cp.cuda.malloc_managed(1 << 20)
    out = cp.ndarray(1 << 20, dtype=cp.uint8, memptr=mem)
    with ferry.open(path) as f:
        report = f.pread(out).report
    assert np.array_equal(cp.asnumpy(out), data)
    assert report["total_bytes"] == 1 << 20


def test_stats_show_device_routes(cp, make_file):
    path, _ = make_file(1 << 20)
    ferry.reset_stats()
    with ferry.open(path, compat_mode="on") as f:
        f.pread(cp.empty(1 << 20, dtype=cp.uint8)).result()
    assert ferry.stats().routes_used == {"staged": ferry.stats()["total_ops"]}


# ---- PyTorch


@pytest.mark.parametrize("compat_mode", ["on", "auto"])
def test_torch_cuda_read_and_write_are_byte_exact(torch_cuda, make_file, tmp_path, compat_mode):
    torch = torch_cuda
    path, data = make_file(ODD_SIZE, seed=31)
    with ferry.open(path, compat_mode=compat_mode) as f:
        out = torch.empty(ODD_SIZE, dtype=torch.uint8, device="cuda")
        report = f.pread(out).report
    assert np.array_equal(out.cpu().numpy(), data)
    assert "host" not in report.routes_used
    back = tmp_path / "torch_out.bin"
    with ferry.open(back, "w", compat_mode=compat_mode) as f:
        assert f.write(out) == ODD_SIZE
    assert back.read_bytes() == data.tobytes()


def test_torch_typed_tensor(torch_cuda, make_file):
    torch = torch_cuda
    path, data = make_file(4 << 20, seed=32)
    with ferry.open(path) as f:
        out = torch.empty((1024, 1024), dtype=torch.float32, device="cuda")
        assert f.read(out) == 4 << 20
    assert out.cpu().numpy().tobytes() == data.tobytes()


def test_torch_tensors_ferry_cannot_use(torch_cuda, make_file):
    torch = torch_cuda
    path, _ = make_file(1 << 20)
    with ferry.open(path) as f:
        with pytest.raises(ferry.InvalidBufferError, match="not contiguous"):
            f.pread(torch.empty((64, 64), device="cuda").t())
        with pytest.raises(ferry.InvalidBufferError, match="grad"):
            f.pread(torch.empty(1024, device="cuda", requires_grad=True))
        assert f.report()["total_ops"] == 0


def test_torch_cpu_tensor_from_the_tensor_itself(torch, make_file):
    # Not through DLPack: PyTorch's export asks CUDA whether the tensor is pinned, which fails in a process
    # forked after CUDA started (test_fork.py's DataLoader). bfloat16 has no NumPy twin.
    path, data = make_file(1 << 20, seed=33)
    out = torch.full(((1 << 20) // 2 + 1,), 7, dtype=torch.bfloat16)
    with ferry.open(path) as f:
        report = f.pread(out[:-1]).report
    assert np.array_equal(out.view(torch.uint8).numpy()[: 1 << 20], data)
    assert out[-1].item() == 7, "the element after the destination changed"
    assert report.routes_used == {"host": report["total_ops"]}


def test_torch_cpu_tensors_ferry_cannot_use(torch, make_file):
    path, _ = make_file(1 << 20)
    with ferry.open(path) as f:
        with pytest.raises(ferry.InvalidBufferError, match="not contiguous"):
            f.pread(torch.empty((64, 64)).t())
        with pytest.raises(ferry.InvalidBufferError, match="grad"):
            f.pread(torch.empty(1024, requires_grad=True))
        with pytest.raises(ferry.InvalidBufferError, match="resolve_conj"):
            f.pread(torch.empty(64, dtype=torch.complex64).conj())
        assert f.report()["total_ops"] == 0