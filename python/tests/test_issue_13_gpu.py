"""Stream-ordered reads and writes (File.read_async / write_async) on a real GPU, with CuPy and PyTorch
streams: work queued before a request on its stream happens first, work queued after it sees its bytes,
and the calling thread does not wait. Skips, saying why, without CuPy/PyTorch or a GPU."""

from __future__ import annotations

import time

import numpy as np
import pytest

import ferry

SIZE = 3 * 1024 * 1024 + 4097


# Holds a stream on the device: one thread spins until `ns` nanoseconds of the GPU's global timer have
# passed. A host function that sleeps held nothing for the test (run 4 of
# bench/results/2026-12-02-h200-warm-up-and-batches: CuPy's launch of it and the fill after it took the whole
# sleep before read_async was called), and a spin on the device costs the calling thread nothing.
SPIN_SOURCE = r"""
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""


def hold_stream(cp):
    """Returns hold(stream, seconds), compiled and run once first, so that its later launches only queue."""
    spin = cp.RawKernel(SPIN_SOURCE, "spin")
    spin((1,), (1,), (np.uint64(0),))
    cp.cuda.Device().synchronize()
    return lambda stream, seconds: spin((1,), (1,), (np.uint64(int(seconds * 1e9)),), stream=stream)


@pytest.mark.parametrize("compat_mode", ["on", "auto"])
def test_cupy_read_async_is_ordered_on_its_stream(cp, make_file, compat_mode):
    path, data = make_file(SIZE, seed=13)
    stream = cp.cuda.Stream(non_blocking=True)
    hold_for = hold_stream(cp)
    out = cp.empty(SIZE + 1, dtype=cp.uint8)
    after = cp.empty_like(out)
    hold = 1.0
    with ferry.open(path, compat_mode=compat_mode, task_size="1MiB") as f, stream:
        # Every step below runs once first, unheld and untimed, on this very stream: a step's first run may
        # load a module or allocate, and either waits for the stream. (The first test of a process found
        # `out.fill(0x11)` taking the whole hold after a warm-up with `fill(0)`, which CuPy does with a memset
        # and no kernel: run 2 of bench/results/2026-12-02-h200-batch-fills.)
        hold_for(stream, 0)
        out.fill(0x22)
        f.read_async(out, stream=stream, size=SIZE).result()
        cp.copyto(after, out)
        stream.synchronize()
        # Hold the stream on the device, then fill the buffer: the read must wait for both.
        steps = {}
        held_from = last = time.monotonic()

        def step(name):
            nonlocal last
            now = time.monotonic()
            steps[name] = round(now - last, 4)
            last = now

        hold_for(stream, hold)
        step("spin")
        out.fill(0x11)
        step("fill")
        fut = f.read_async(out, stream=stream, size=SIZE)
        step("read_async")
        cp.copyto(after, out)  # queued after the read on the same stream
        step("copy")
        since_hold = last - held_from
        assert steps["read_async"] < 0.25, f"read_async blocked the calling thread: seconds per step {steps}"
        assert since_hold < hold / 2, (
            f"queueing took {since_hold:.3f} s of a {hold} s hold (seconds per step {steps}): the test cannot "
            "tell whether the read waited for the work before it")
        assert not fut.done(), f"the read was done {since_hold:.3f} s into a {hold} s hold of its stream"
        stream.synchronize()
        assert fut.wait(10), "the future did not end after its stream passed it"
        assert fut.result() == SIZE
        assert time.monotonic() - held_from >= hold * 0.9, "the stream was not held: the spin did not run"
    host = cp.asnumpy(after)
    assert np.array_equal(host[:SIZE], data), "the copy queued after the read did not see its bytes"
    assert host[SIZE] == 0x11


def test_cupy_read_async_takes_a_raw_stream_handle(cp, make_file):
    path, data = make_file(SIZE, seed=14)
    stream = cp.cuda.Stream(non_blocking=True)
    with ferry.open(path) as f:
        out = cp.zeros(SIZE, dtype=cp.uint8)
        fut = f.read_async(out, stream=stream.ptr)
        with stream:
            total = out.sum(dtype=cp.uint64)  # queued after the read
        stream.synchronize()
        assert fut.result() == SIZE
        assert int(total) == int(data.sum(dtype=np.uint64))


def test_cupy_read_async_into_host_memory_feeds_a_later_copy(cp, make_file):
    path, data = make_file(SIZE, seed=15)
    stream = cp.cuda.Stream(non_blocking=True)
    pinned = cp.cuda.alloc_pinned_memory(SIZE)
    host = np.frombuffer(pinned, dtype=np.uint8, count=SIZE)
    host[:] = 0
    dev = cp.empty(SIZE, dtype=cp.uint8)
    with ferry.open(path) as f:
        fut = f.read_async(host, stream=stream)
        dev.set(host, stream=stream)  # a host-to-device copy queued after the read
        stream.synchronize()
        assert fut.result() == SIZE
    assert np.array_equal(cp.asnumpy(dev), data)


def test_cupy_write_async_waits_for_the_kernel_that_makes_its_data(cp, tmp_path):
    path = tmp_path / "out.bin"
    stream = cp.cuda.Stream(non_blocking=True)
    hold_for = hold_stream(cp)
    with ferry.open(path, "w") as f, stream:
        src = cp.empty(SIZE, dtype=cp.uint8)
        hold_for(stream, 0.2)
        src[:] = (cp.arange(SIZE, dtype=cp.uint64) % 251).astype(cp.uint8)
        fut = f.write_async(src, stream=stream)
        stream.synchronize()
        assert fut.result() == SIZE
    expected = (np.arange(SIZE, dtype=np.uint64) % 251).astype(np.uint8)
    assert np.array_equal(np.fromfile(path, dtype=np.uint8), expected)


def test_cupy_failed_read_async_releases_the_stream(cp, tmp_path):
    path = tmp_path / "w.bin"
    stream = cp.cuda.Stream(non_blocking=True)
    with ferry.open(path, "w") as f, stream:
        out = cp.full(4096, 7, dtype=cp.uint8)
        fut = f.read_async(out, stream=stream)  # the file is write-only: the read fails
        after = out.copy()
        stream.synchronize()  # returns: the stream was released
        with pytest.raises(ferry.FerryError, match="opened for writing only"):
            fut.result()
    assert int(cp.asnumpy(after).min()) == 7


def test_torch_read_async_on_a_torch_stream(torch_cuda, make_file):
    torch = torch_cuda
    path, data = make_file(SIZE, seed=16)
    stream = torch.cuda.Stream()
    with ferry.open(path, task_size="1MiB") as f, torch.cuda.stream(stream):
        t = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
        t.fill_(0x22)
        fut = f.read_async(t, stream=stream)
        after = t.clone()
        stream.synchronize()
        assert fut.result() == SIZE
    assert np.array_equal(after.cpu().numpy(), data)


def test_torch_write_async_on_a_torch_stream(torch_cuda, tmp_path):
    torch = torch_cuda
    path = tmp_path / "t.bin"
    stream = torch.cuda.Stream()
    with ferry.open(path, "w") as f, torch.cuda.stream(stream):
        t = torch.arange(SIZE, device="cuda", dtype=torch.int64).remainder_(241).to(torch.uint8)
        fut = f.write_async(t, stream=stream)
        stream.synchronize()
        assert fut.result() == SIZE
    expected = (np.arange(SIZE, dtype=np.int64) % 241).astype(np.uint8)
    assert np.array_equal(np.fromfile(path, dtype=np.uint8), expected)
