#!/usr/bin/env python3
"""Stream-ordered reads against pread for the same bytes, and their overlap with kernels (issue 20).

For each size (hot page cache, GPU 0, PyTorch): the pinned host-to-device copy ceiling, `pread` (the
future waited for) and `read_async` on a stream of its own then `synchronize()`, alternating, median of
--repeats each; the ratio read_async / pread. Then overlap: a chain of matrix products on one stream and a
read_async of the same file on another, timed with CUDA events on both streams, alone and together: the
intervals' overlap and the wall time together against the sum of the two alone.

    python3 bench/stream_order_bench.py --dir DIR [--sizes 1GiB,8GiB] [--repeats 5] [--json-out F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Dict, List

import numpy as np


def parse_size(text: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(text)


def make_file(path: str, size: int) -> None:
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    cli = os.environ.get("FERRY_CLI")
    if cli:  # generated data, much faster than NumPy's generator
        import subprocess

        subprocess.run([cli, "write", path, "--size", str(size), "--no-sync"], check=True, capture_output=True)
        return
    rng = np.random.default_rng(7)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 256 << 20)
            f.write(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
            left -= n


def warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--sizes", default="1GiB,8GiB")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()

    import torch

    import ferry

    torch.cuda.init()
    rows: List[Dict[str, object]] = []
    gib = float(1 << 30)
    for text in args.sizes.split(","):
        size = parse_size(text)
        path = os.path.join(args.dir, f"stream-order-{text}.bin")
        make_file(path, size)
        warm(path)
        dev = torch.empty(size, dtype=torch.uint8, device="cuda")
        pinned = torch.empty(min(size, 1 << 30), dtype=torch.uint8, pin_memory=True)
        s = torch.cuda.Stream()
        times: Dict[str, List[float]] = {"copy": [], "pread": [], "read_async": []}
        with ferry.open(path) as f:
            f.pread(dev).result()  # set-up (pinned bounce buffers, threads) out of the timings
            f.read_async(dev, stream=s).result()
            for _ in range(args.repeats):
                torch.cuda.synchronize()
                t = time.perf_counter()
                for at in range(0, size, pinned.numel()):
                    n = min(pinned.numel(), size - at)
                    dev[at:at + n].copy_(pinned[:n], non_blocking=True)
                torch.cuda.synchronize()
                times["copy"].append(time.perf_counter() - t)
                t = time.perf_counter()
                f.pread(dev).result()
                times["pread"].append(time.perf_counter() - t)
                t = time.perf_counter()
                fut = f.read_async(dev, stream=s)
                s.synchronize()
                times["read_async"].append(time.perf_counter() - t)
                fut.result()
            check = f.read_async(dev, stream=s)
            check.result()
            mechanism = check.report["stream_order"]
        rates = {k: size / statistics.median(v) / gib for k, v in times.items()}
        row = {
            "size": text,
            "bytes": size,
            "gib_per_s": {k: round(v, 2) for k, v in rates.items()},
            "read_async_over_pread": round(rates["read_async"] / rates["pread"], 3),
            "pread_over_copy": round(rates["pread"] / rates["copy"], 3),
            "read_async_over_copy": round(rates["read_async"] / rates["copy"], 3),
            "stream_order": mechanism,
            "repeats": args.repeats,
        }
        rows.append(row)
        print(f"{text}: copy {rates['copy']:.2f} GiB/s, pread {rates['pread']:.2f}, read_async {rates['read_async']:.2f}"
              f" = {row['read_async_over_pread']:.3f} of pread ({mechanism})", flush=True)
        del dev, pinned

    # Overlap: matrix products on stream A, a 1 GiB read_async on stream B.
    size = 1 << 30
    path = os.path.join(args.dir, "stream-order-overlap.bin")
    make_file(path, size)
    warm(path)
    dev = torch.empty(size, dtype=torch.uint8, device="cuda")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    sa, sb = torch.cuda.Stream(), torch.cuda.Stream()
    events = {name: torch.cuda.Event(enable_timing=True) for name in ("a0", "a1", "b0", "b1", "t0")}

    def kernels() -> None:
        with torch.cuda.stream(sa):
            events["a0"].record(sa)
            x = a
            for _ in range(60):
                x = a @ a
            events["a1"].record(sa)

    def read(f) -> None:
        with torch.cuda.stream(sb):
            events["b0"].record(sb)
            f.read_async(dev, stream=sb)
            events["b1"].record(sb)

    with ferry.open(path) as f:
        f.read_async(dev, stream=sb).result()
        kernels()
        torch.cuda.synchronize()  # warm the matmul
        t = time.perf_counter()
        kernels()
        torch.cuda.synchronize()
        alone_kernels = time.perf_counter() - t
        t = time.perf_counter()
        read(f)
        torch.cuda.synchronize()
        alone_read = time.perf_counter() - t
        torch.cuda.synchronize()
        events["t0"].record()
        t = time.perf_counter()
        kernels()
        read(f)
        torch.cuda.synchronize()
        together = time.perf_counter() - t
    t0 = events["t0"]
    span = {k: (t0.elapsed_time(events[k + "0"]), t0.elapsed_time(events[k + "1"])) for k in ("a", "b")}
    overlap_ms = max(0.0, min(span["a"][1], span["b"][1]) - max(span["a"][0], span["b"][0]))
    overlap = {
        "kernels_alone_ms": round(alone_kernels * 1e3, 2),
        "read_alone_ms": round(alone_read * 1e3, 2),
        "together_ms": round(together * 1e3, 2),
        "sum_alone_ms": round((alone_kernels + alone_read) * 1e3, 2),
        "kernels_interval_ms": [round(v, 2) for v in span["a"]],
        "read_interval_ms": [round(v, 2) for v in span["b"]],
        "overlap_ms": round(overlap_ms, 2),
    }
    print(f"overlap: kernels {overlap['kernels_alone_ms']} ms alone, read {overlap['read_alone_ms']} ms alone, "
          f"together {overlap['together_ms']} ms (sum {overlap['sum_alone_ms']}); intervals kernels "
          f"{overlap['kernels_interval_ms']} read {overlap['read_interval_ms']}: overlap {overlap['overlap_ms']} ms",
          flush=True)
    doc = {"sizes": rows, "overlap": overlap}
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(doc, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
