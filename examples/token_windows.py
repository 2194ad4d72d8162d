#!/usr/bin/env python3
"""Random fixed-length windows of a token file into a [batch, block] GPU tensor, as a training script
samples them (nanoGPT-style `get_batch`): with ferry's batch read, and with the numpy.memmap +
pin_memory() + .to(device, non_blocking=True) loop such scripts use today. Prints batches/s of each, in one
run, and checks that both produce the same batch for the same offsets.

    python3 examples/token_windows.py [--tokens FILE] [--batch 64] [--block 1024] [--steps 200] [--device cuda:0]

Without --tokens, a file of 2**28 random uint16 tokens (512 MiB) is written to a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch

import ferry


def ferry_batches(f: "ferry.File", n_tokens: int, batch: int, block: int, device: str, rng: np.random.Generator):
    """Yields (x, y) with x[i] = tokens[o:o+block], y[i] = tokens[o+1:o+1+block], one read per batch."""
    x = torch.empty((batch, block + 1), dtype=torch.uint16, device=device)
    while True:
        starts = rng.integers(0, n_tokens - block - 1, batch)
        f.pread_batch(x, starts * 2, (block + 1) * 2).result()  # uint16: 2 bytes a token
        yield x[:, :-1], x[:, 1:], starts


def memmap_batches(path: str, batch: int, block: int, device: str, rng: np.random.Generator):
    """The loop training scripts use: slices of a memmap, stacked, pinned, copied without blocking."""
    data = np.memmap(path, dtype=np.uint16, mode="r")
    while True:
        starts = rng.integers(0, len(data) - block - 1, batch)
        xy = torch.from_numpy(np.stack([data[s:s + block + 1].astype(np.int64) for s in starts]))
        xy = xy.pin_memory().to(device, non_blocking=True)
        yield xy[:, :-1], xy[:, 1:], starts


def rate(batches, steps: int) -> float:
    next(batches)  # warm-up: pinned buffers, threads, CUDA
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        next(batches)
    torch.cuda.synchronize()
    return steps / (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", default=None)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    tmp = None
    path = args.tokens
    if path is None:
        tmp = tempfile.TemporaryDirectory()
        path = os.path.join(tmp.name, "tokens.bin")
        np.random.default_rng(0).integers(0, 50257, 1 << 28, dtype=np.uint16).tofile(path)
    n_tokens = os.path.getsize(path) // 2
    with open(path, "rb") as warm:  # hot page cache for both loaders
        while warm.read(64 << 20):
            pass
    with ferry.open(path) as f:
        # Both loaders, the same offsets: the same batch.
        fx, fy, starts = next(ferry_batches(f, n_tokens, args.batch, args.block, args.device, np.random.default_rng(1)))
        mx, my, _ = next(memmap_batches(path, args.batch, args.block, args.device, np.random.default_rng(1)))
        assert torch.equal(fx.to(torch.int64), mx) and torch.equal(fy.to(torch.int64), my), "the loaders disagree"
        ferry_rate = rate(ferry_batches(f, n_tokens, args.batch, args.block, args.device, np.random.default_rng(2)),
                          args.steps)
    memmap_rate = rate(memmap_batches(path, args.batch, args.block, args.device, np.random.default_rng(2)), args.steps)
    tokens = args.batch * (args.block + 1)
    print(f"[{args.batch}, {args.block}] windows of uint16 tokens from {path} ({n_tokens} tokens), hot:")
    print(f"  ferry pread_batch:                    {ferry_rate:9.1f} batches/s ({ferry_rate * tokens / 1e6:.1f} M tokens/s)")
    print(f"  memmap + pin_memory + .to(non_blocking): {memmap_rate:6.1f} batches/s ({memmap_rate * tokens / 1e6:.1f} M tokens/s)")
    print(f"  ratio: {ferry_rate / memmap_rate:.2f}x")
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
