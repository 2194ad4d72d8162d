#!/usr/bin/env python3
"""A randomized stress of stream-ordered reads and writes (issue 20), run on the GPU machine.

Each request sits between a producer and consumers on its stream: a read fills its buffer (with a guard
byte on each side) with 0xEE, then ferry reads into it, then a consumer kernel counts the bytes that differ
from a reference copy of the file in GPU memory and checks the guards, then another kernel overwrites the
buffer. A write copies the reference slice into a fresh buffer, ferry writes it at the same offset of a
second file, then a kernel zeroes the buffer. Streams are PyTorch streams, CuPy non-blocking streams and
raw driver streams (cuStreamCreate); sizes are 1 byte to 64 MiB, unaligned, at random offsets, with random
compat modes. Meanwhile other threads allocate and free device and pinned memory (torch.cuda.empty_cache()
included), synchronise the device and launch work on the legacy default stream; some requests are
cancelled, some files closed and reopened. Every future must end in success (or `cancelled`, for the
cancelled ones), every consumer must have seen the file's bytes, no guard may change, and the written
file must hold the reference's bytes where writes succeeded and nothing anywhere else.

A hang is a failure: a watchdog prints the pending stream-ordered requests and every thread's stack, and
ends the process with status 1. Seeded; the seed is printed. Prints one JSON line of figures last.

With --pinned-budget (issue 50) the process's pinned staging is capped (ferry.config.pinned_budget) and the
run also fails when ferry.pinned_memory() saw more pinned bytes at once than the budget.

    python3 bench/stream_order_stress.py [--requests 2000] [--seed N] [--watchdog 300] [--dir DIR]
                                         [--pinned-budget 64MiB]
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import json
import math
import os
import random
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

FILE_BYTES = 256 << 20
MAX_REQUEST = 64 << 20
GUARD = 0xEE


def log_uniform_size(rng: random.Random, top: int) -> int:
    return max(1, min(top, int(math.exp(rng.uniform(0.0, math.log(top))))))


class RawStreams:
    """Driver streams made with cuStreamCreate (non-blocking), outside either framework."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.handles: List[int] = []

    def create(self) -> int:
        handle = ctypes.c_void_p()
        rc = self.lib.cuStreamCreate(ctypes.byref(handle), 1)  # CU_STREAM_NON_BLOCKING
        if rc != 0:
            raise RuntimeError(f"cuStreamCreate failed with {rc}")
        self.handles.append(int(handle.value))
        return int(handle.value)

    def destroy_all(self) -> None:
        for h in self.handles:
            self.lib.cuStreamDestroy_v2(ctypes.c_void_p(h))


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--watchdog", type=float, default=300.0, help="seconds before the run is taken as hung")
    ap.add_argument("--dir", default=None, help="where the two 256 MiB files go (default: a temporary folder)")
    ap.add_argument("--in-flight", type=int, default=48)
    ap.add_argument("--pinned-budget", default=None, help="cap the process's pinned staging (ferry.config.pinned_budget)")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"stream-order stress: seed {seed}, {args.requests} requests, watchdog {args.watchdog:.0f} s", flush=True)
    if args.pinned_budget is not None:
        import ferry
        ferry.config.pinned_budget = args.pinned_budget
        print(f"pinned budget: {ferry.config.pinned_budget} bytes", flush=True)
    return run(args.requests, seed, args.watchdog, args.dir, args.in_flight)


def wrap_raw_stream(cp: Any, handle: int) -> Any:
    """A CuPy stream object for a stream CuPy did not make. The GPU machine's CuPy deprecates ExternalStream (for
    Stream.from_external, which older CuPy lacks): the warning is about this harness, not about Ferry."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="ExternalStream is deprecated", category=DeprecationWarning)
        return cp.cuda.ExternalStream(handle)


def run(requests: int, seed: int, watchdog_s: float, directory: Optional[str], in_flight: int) -> int:
    import cupy as cp
    import torch

    import ferry
    from ferry import _ferry

    pending_report = _ferry._PendingReport(max(watchdog_s - 1, 1), f"stream-order stress (seed {seed})")
    faulthandler.dump_traceback_later(watchdog_s, exit=True, file=sys.__stderr__)
    rng = random.Random(seed)
    tmp = tempfile.TemporaryDirectory(dir=directory)
    data = np.random.default_rng(seed).integers(0, 256, FILE_BYTES, dtype=np.uint8)
    src_path = os.path.join(tmp.name, "data.bin")
    dst_path = os.path.join(tmp.name, "written.bin")
    data.tofile(src_path)
    with open(dst_path, "wb") as f:
        f.truncate(FILE_BYTES)

    torch.cuda.init()
    ref_t = torch.from_numpy(data).cuda()
    ref_c = cp.asarray(ref_t)  # the same memory, seen by CuPy
    torch.cuda.synchronize()
    raw = RawStreams()
    streams: List[Tuple[str, Any]] = []
    for i in range(6):
        streams.append(("torch", torch.cuda.Stream()))
    for i in range(6):
        streams.append(("cupy", cp.cuda.Stream(non_blocking=True)))
    for i in range(4):
        streams.append(("raw", wrap_raw_stream(cp, raw.create())))
    modes = ["on", "off", "auto"]
    files: Dict[Tuple[str, str], Any] = {}

    def file(kind: str, mode: str) -> Any:
        key = (kind, mode)
        if key not in files:
            path = src_path if kind == "read" else dst_path
            files[key] = ferry.open(path, "r" if kind == "read" else "r+", compat_mode=mode)
        return files[key]

    mismatches = torch.zeros(requests, dtype=torch.int64, device="cuda")
    guards = torch.zeros(requests, dtype=torch.int64, device="cuda")
    mismatches_c = cp.asarray(mismatches)
    guards_c = cp.asarray(guards)

    stop = threading.Event()
    noise_errors: List[str] = []
    noise_counts = {"device_allocs": 0, "empty_cache": 0, "pinned_allocs": 0, "device_syncs": 0, "legacy_launches": 0}

    def noise_memory() -> None:
        r = random.Random(seed + 1)
        try:
            while not stop.is_set():
                t = torch.empty(r.randrange(1, 512) << 20, dtype=torch.uint8, device="cuda")
                del t
                noise_counts["device_allocs"] += 1
                if r.random() < 0.2:
                    torch.cuda.empty_cache()
                    noise_counts["empty_cache"] += 1
                p = torch.empty(r.randrange(1, 64) << 20, dtype=torch.uint8, pin_memory=True)
                del p
                pc = cp.cuda.alloc_pinned_memory(r.randrange(1, 32) << 20)
                del pc
                noise_counts["pinned_allocs"] += 2
                time.sleep(r.uniform(0, 0.01))
        except Exception as e:  # reported, and fails the run
            noise_errors.append(f"memory thread: {e!r}")

    def noise_sync() -> None:
        r = random.Random(seed + 2)
        try:
            x = torch.ones(1 << 20, device="cuda")
            y = cp.ones(1 << 20, dtype=cp.float32)
            while not stop.is_set():
                if r.random() < 0.5:
                    torch.cuda.synchronize()
                    noise_counts["device_syncs"] += 1
                with cp.cuda.Stream.null:
                    y *= 1.0001
                (x * 2).sum()  # PyTorch's default stream is the legacy one
                noise_counts["legacy_launches"] += 2
                time.sleep(r.uniform(0, 0.005))
        except Exception as e:
            noise_errors.append(f"sync thread: {e!r}")

    threads = [threading.Thread(target=noise_memory, daemon=True), threading.Thread(target=noise_sync, daemon=True)]
    for t in threads:
        t.start()

    outcomes = {"ok": 0, "cancelled": 0, "closed_early": 0}
    failures: List[str] = []
    written_ok = np.zeros(FILE_BYTES, dtype=bool)
    written_maybe = np.zeros(FILE_BYTES, dtype=bool)
    checked_reads: List[int] = []
    live: List[Tuple[int, Any, str, int, int, bool, Any]] = []  # index, future, op, offset, size, cancelled, keep
    moved = 0
    closes = 0
    started = time.monotonic()

    def settle(entry: Tuple[int, Any, str, int, int, bool, Any]) -> None:
        nonlocal moved
        k, fut, op, offset, size, cancelled, _keep = entry
        try:
            fut.result()
        except ferry.CancelledError:
            if not cancelled:
                failures.append(f"request {k} ({op} of {size} at {offset}) was cancelled but nobody asked")
            outcomes["cancelled"] += 1
            if op == "write":
                written_maybe[offset:offset + size] = True
            return
        except Exception as e:  # a File closed before its stream got there is the one other allowed end
            if "was closed before the stream reached" in str(e):
                outcomes["closed_early"] += 1
                if op == "write":
                    written_maybe[offset:offset + size] = True
                return
            failures.append(f"request {k} ({op} of {size} at {offset}): {e!r}")
            return
        outcomes["ok"] += 1
        moved += size
        if op == "read":
            checked_reads.append(k)
        else:
            written_ok[offset:offset + size] = True

    for k in range(requests):
        kind, stream = rng.choice(streams)
        op = "read" if rng.random() < 0.7 else "write"
        mode = rng.choice(modes)
        size = log_uniform_size(rng, MAX_REQUEST)
        offset = rng.randrange(0, FILE_BYTES - size + 1)
        f = file(op, mode)
        if kind == "torch":
            with torch.cuda.stream(stream):
                if op == "read":
                    buf = torch.empty(size + 2, dtype=torch.uint8, device="cuda")
                    buf.fill_(GUARD)  # the producer
                    fut = f.read_async(buf[1:1 + size], offset=offset, stream=stream)
                    mismatches[k] = torch.ne(buf[1:1 + size], ref_t[offset:offset + size]).sum()
                    guards[k] = (buf[0] != GUARD).long() + (buf[-1] != GUARD).long()
                    buf.fill_(0)  # later work that overwrites the buffer
                else:
                    buf = torch.empty(size, dtype=torch.uint8, device="cuda")
                    buf.copy_(ref_t[offset:offset + size])
                    fut = f.write_async(buf, offset=offset, stream=stream)
                    buf.fill_(0)
        else:
            with stream:
                if op == "read":
                    buf = cp.empty(size + 2, dtype=cp.uint8)
                    buf.fill(GUARD)
                    fut = f.read_async(buf[1:1 + size], offset=offset, stream=stream)
                    mismatches_c[k] = cp.count_nonzero(buf[1:1 + size] != ref_c[offset:offset + size])
                    guards_c[k] = (buf[0] != GUARD).astype(cp.int64) + (buf[-1] != GUARD).astype(cp.int64)
                    buf.fill(0)
                else:
                    buf = cp.empty(size, dtype=cp.uint8)
                    buf[...] = ref_c[offset:offset + size]
                    fut = f.write_async(buf, offset=offset, stream=stream)
                    buf.fill(0)
        cancelled = rng.random() < 0.03
        if cancelled:
            fut.cancel()
        live.append((k, fut, op, offset, size, cancelled, (buf, stream)))
        if rng.random() < 0.005:  # close a File with requests in flight, and open it again on next use
            key = rng.choice(list(files))
            files.pop(key).close()
            closes += 1
        while len(live) > in_flight:
            settle(live.pop(0))
    while live:
        settle(live.pop(0))
    for _, s in streams:
        s.synchronize()
    stop.set()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    seconds = time.monotonic() - started
    for f in files.values():
        f.close()

    mism = mismatches.cpu().numpy()
    guard = guards.cpu().numpy()
    wrong_reads = [k for k in checked_reads if mism[k] != 0]
    wrong_guards = [k for k in range(requests) if guard[k] != 0]
    written = np.fromfile(dst_path, dtype=np.uint8)
    bad_written = int(np.count_nonzero(written[written_ok] != data[written_ok]))
    untouched = ~(written_ok | written_maybe)
    bad_untouched = int(np.count_nonzero(written[untouched] != 0))
    maybe_only = written_maybe & ~written_ok
    bad_maybe = int(np.count_nonzero((written[maybe_only] != 0) & (written[maybe_only] != data[maybe_only])))
    report = ferry.Report._from_parts(_ferry.process_report())
    result = {
        "seed": seed,
        "requests": requests,
        "streams": {"torch": 6, "cupy": 6, "raw": 4},
        "seconds": round(seconds, 2),
        "bytes_moved": moved,
        "outcomes": outcomes,
        "files_closed_with_requests_in_flight": closes,
        "stream_order": report.get("stream_order", {}),
        "noise": noise_counts,
        "wrong_reads": len(wrong_reads),
        "wrong_bytes_in_written_ranges": bad_written,
        "bytes_changed_outside_writes": bad_untouched,
        "bytes_neither_old_nor_new_in_cancelled_writes": bad_maybe,
        "guard_bytes_changed": len(wrong_guards),
        "failures": failures[:20],
        "noise_errors": noise_errors,
        "hangs": 0,
        "pinned_memory": ferry.pinned_memory(),
    }
    faulthandler.cancel_dump_traceback_later()
    pending_report.cancel()
    raw.destroy_all()
    print(json.dumps(result), flush=True)
    pinned = result["pinned_memory"]
    over_budget = pinned["peak_bytes"] > pinned["budget"]
    clean = not (failures or noise_errors or wrong_reads or wrong_guards or bad_written or bad_untouched or bad_maybe
                 or over_budget)
    print("stream-order stress:", "PASSED" if clean else "FAILED", f"(seed {seed})", flush=True)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
