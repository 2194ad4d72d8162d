#!/usr/bin/env python3
"""What one stream's copy commands cost around them (issue 20): a stream-ordered read queues, per piece, a
wait on a host word, a copy from a pinned slot, and a write of a word. This times 8 GiB moved from a ring
of pinned slots into device memory on one stream, with nothing else running, in these shapes:

- copies only, back to back (4 MiB and 16 MiB);
- each copy behind a wait whose condition already holds, and followed by a word write (what
  `stream_copies` queues), at 4 MiB, 8 MiB and 16 MiB per command;
- the write alone and the wait alone beside each copy;
- one 1 GiB copy (the ceiling as bench/stream_order_bench.py measures it).

No file is read: the difference between the shapes is the commands' own cost on the GPU.

    python3 lab/stream_command_cost.py [--total 8GiB] [--repeats 5] [--json-out F]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import time

import torch

CU_STREAM_WAIT_VALUE_GEQ = 0
CU_MEMHOSTALLOC_DEVICEMAP = 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--total", default="8GiB")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    total = int(args.total[:-3]) << 30 if args.total.endswith("GiB") else int(args.total)

    torch.cuda.init()
    cuda = ctypes.CDLL("libcuda.so.1")
    for name in ("cuStreamWaitValue32_v2", "cuStreamWriteValue32_v2", "cuMemcpyHtoDAsync_v2"):
        getattr(cuda, name).restype = ctypes.c_int
    cuda.cuStreamWaitValue32_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    cuda.cuStreamWriteValue32_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    cuda.cuMemcpyHtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]

    dev = torch.empty(total, dtype=torch.uint8, device="cuda")
    ring_bytes = 128 << 20
    ring = torch.empty(ring_bytes, dtype=torch.uint8, pin_memory=True)
    big = torch.empty(1 << 30, dtype=torch.uint8, pin_memory=True)
    words = torch.zeros(2, dtype=torch.int32, pin_memory=True)  # [0]: the host's word, [1]: the stream's
    words[0] = 0x7FFFFFFF  # every wait's condition already holds
    cpu_word = words.data_ptr()  # pinned memory is mapped at the same address under unified addressing
    gpu_word = cpu_word + 4
    stream = torch.cuda.Stream()
    handle = ctypes.c_void_p(stream.cuda_stream)

    def check(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed with CUresult {rc}")

    def queue(piece: int, wait: bool, write: bool) -> None:
        for i, at in enumerate(range(0, total, piece)):
            if wait:
                check(cuda.cuStreamWaitValue32_v2(handle, cpu_word, i + 1, CU_STREAM_WAIT_VALUE_GEQ), "wait")
            src = ring.data_ptr() + (i * piece) % ring_bytes
            check(cuda.cuMemcpyHtoDAsync_v2(dev.data_ptr() + at, src, piece, handle), "copy")
            if write:
                check(cuda.cuStreamWriteValue32_v2(handle, gpu_word, i + 2, 0), "write")

    def one_big() -> None:
        for at in range(0, total, big.numel()):
            check(cuda.cuMemcpyHtoDAsync_v2(dev.data_ptr() + at, big.data_ptr(), big.numel(), handle), "copy")

    shapes = {
        "copies 4 MiB": lambda: queue(4 << 20, False, False),
        "copies 16 MiB": lambda: queue(16 << 20, False, False),
        "wait+copy+write 4 MiB": lambda: queue(4 << 20, True, True),
        "wait+copy+write 8 MiB": lambda: queue(8 << 20, True, True),
        "wait+copy+write 16 MiB": lambda: queue(16 << 20, True, True),
        "copy+write 4 MiB": lambda: queue(4 << 20, False, True),
        "wait+copy 4 MiB": lambda: queue(4 << 20, True, False),
        "copies 1 GiB": one_big,
    }
    rows = {}
    for name, shape in shapes.items():
        times = []
        for r in range(args.repeats + 1):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            # Queued as the GPU runs: more than about a thousand commands do not fit the stream's queue while
            # it is held, and queueing (a few us a command) stays ahead of 4 MiB copies (about 80 us each).
            start.record(stream)
            t = time.perf_counter()
            shape()
            queued = time.perf_counter() - t
            end.record(stream)
            end.synchronize()
            if r > 0:  # the first is a warm-up
                times.append(start.elapsed_time(end) / 1e3)
        seconds = statistics.median(times)
        rows[name] = {"gib_per_s": round(total / seconds / (1 << 30), 2), "ms": round(seconds * 1e3, 2),
                      "queue_ms": round(queued * 1e3, 2)}
        bound = "  QUEUEING-BOUND: the GPU waited for commands" if queued > 0.8 * seconds else ""
        print(f"{name:24s} {rows[name]['gib_per_s']:6.2f} GiB/s  {rows[name]['ms']:8.2f} ms on the GPU "
              f"(queued in {rows[name]['queue_ms']:.1f} ms){bound}", flush=True)
    base = rows["copies 4 MiB"]["ms"]
    for name in shapes:
        pieces = total // (4 << 20)
        print(f"{name:24s} {1e3 * (rows[name]['ms'] - base) / pieces:+.2f} us per 4 MiB against plain 4 MiB copies")
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump({"total_bytes": total, "repeats": args.repeats, "shapes": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
