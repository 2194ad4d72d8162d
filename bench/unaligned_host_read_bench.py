#!/usr/bin/env python3
"""Cold reads into the host buffers Python users have (issue 48): np.empty and torch.empty (16 and 64 bytes
past a page, which O_DIRECT cannot reach) against the same read into a page-aligned buffer, alternating, in
one process:

    PYTHONPATH=build/python python3 bench/unaligned_host_read_bench.py [--file PATH] [--size 4GiB] [--rounds 3]
        [--out DIR]

The file (generated once with `ferry write` bytes when missing, or any file you name) is dropped from the page
cache before every read (ferry.page_cache.evict: fdatasync and POSIX_FADV_DONTNEED, no root needed). Prints
one JSON line per read and a summary: the median seconds of each buffer kind and their ratio to the aligned
buffer's, with the goal cold np.empty / torch.empty >= 0.9 x the aligned read (as a rate).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np


def parse_size(text: str) -> int:
    from ferry._config import parse_size as ferry_size

    return int(ferry_size(text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", default="build/bench-data/host-read-4g.bin")
    ap.add_argument("--size", default="4GiB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import ferry

    size = parse_size(args.size)
    path = Path(args.file)
    if not path.exists() or path.stat().st_size < size:
        path.parent.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(48)
        with ferry.open(path, "w") as f:
            block = rng.integers(0, 256, 64 << 20, dtype=np.uint8)
            for at in range(0, size, block.size):
                f.pwrite(block[: min(block.size, size - at)], offset=at).result()
            f.sync()
    try:
        import torch
    except ImportError:
        torch = None

    def aligned() -> Any:
        raw = np.empty(size + 4096, np.uint8)
        pad = (-raw.ctypes.data) % 4096
        return raw[pad:pad + size]

    kinds = {"aligned": aligned, "np.empty": lambda: np.empty(size, np.uint8)}
    if torch is not None:
        kinds["torch.empty"] = lambda: torch.empty(size, dtype=torch.uint8)
    lines: List[Dict[str, Any]] = []
    times: Dict[str, List[float]] = {k: [] for k in kinds}
    with ferry.open(path, "r") as f:
        for r in range(args.rounds):
            order = list(kinds) if r % 2 == 0 else list(kinds)[::-1]
            for kind in order:
                buf = kinds[kind]()
                view = buf.numpy() if hasattr(buf, "numpy") else buf
                view[:: 1 << 20] = 1  # fault the pages in before the clock starts, as a reused buffer would be
                ferry.page_cache.evict(path)
                t0 = time.perf_counter()
                future = f.pread(buf, offset=0)
                transfer = future.result()
                seconds = time.perf_counter() - t0
                address = int(view.ctypes.data)
                report = future.report
                line = {"kind": kind, "round": r, "seconds": seconds, "gb_per_s": size / seconds / 1e9,
                        "address_mod_4096": address % 4096, "bytes": int(transfer),
                        "direct_ops": int(report["io"]["direct_ops"]), "buffered_ops": int(report["io"]["buffered_ops"]),
                        "notes": report.get("notes", [])}
                lines.append(line)
                print(json.dumps(line), flush=True)
                times[kind].append(seconds)
                del buf, view
    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = {k: med["aligned"] / med[k] for k in med if k != "aligned"}
    summary = {"kind": "summary", "file": str(path), "bytes": size, "median_seconds": med, "rate_vs_aligned": ratios,
               "goals": {f"cold {k} >= 0.9 x aligned": v >= 0.9 for k, v in ratios.items()},
               "host": os.uname().nodename, "cpus": os.cpu_count()}
    lines.append(summary)
    print(json.dumps(summary), flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "unaligned-host-read.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
