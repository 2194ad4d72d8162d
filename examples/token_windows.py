#!/usr/bin/env python3
"""Random fixed-length windows of a token file into a [batch, block] GPU tensor, as a training script
samples them (nanoGPT-style `get_batch`): with ferry's batch read, and with the numpy.memmap +
pin_memory() + .to(device, non_blocking=True) loop such scripts use today. Prints batches/s of each, in one
run, and checks that both produce the same batch for the same offsets.

    python3 examples/token_windows.py [--tokens FILE] [--batch 64] [--block 1024] [--steps 200] [--device cuda:0]

Without --tokens, a file of 2**28 random uint16 tokens (512 MiB; --file-tokens N for another size) is written
to a temporary folder. --device cpu runs it without a GPU (host memory, no pinning). Runs on torch 1.13 and
later (before torch 2.3, whose uint16 it uses, the tokens are read into int16).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch

import ferry


# torch.uint16 came with torch 2.3: before it, int16 holds the same two bytes a token.
TOKEN_DTYPE = getattr(torch, "uint16", torch.int16)


def token_ids(x: torch.Tensor) -> torch.Tensor:
    """The tokens as int64 ids (an int16 tensor holds ids past 32767 as negative numbers)."""
    return x.to(torch.int64) % 65536


def ferry_batches(f: "ferry.File", n_tokens: int, batch: int, block: int, device: str, rng: np.random.Generator):
    """Yields (x, y) with x[i] = tokens[o:o+block], y[i] = tokens[o+1:o+1+block], one read per batch."""
    x = torch.empty((batch, block + 1), dtype=TOKEN_DTYPE, device=device)
    while True:
        starts = rng.integers(0, n_tokens - block - 1, batch)
        f.pread_batch(x, starts * 2, (block + 1) * 2).result()  # 2 bytes a token
        yield x[:, :-1], x[:, 1:], starts


def memmap_batches(path: str, batch: int, block: int, device: str, rng: np.random.Generator):
    """The loop training scripts use: slices of a memmap, stacked, pinned, copied without blocking."""
    data = np.memmap(path, dtype=np.uint16, mode="r")
    while True:
        starts = rng.integers(0, len(data) - block - 1, batch)
        xy = torch.from_numpy(np.stack([data[s:s + block + 1].astype(np.int64) for s in starts]))
        if device != "cpu":
            xy = xy.pin_memory().to(device, non_blocking=True)
        yield xy[:, :-1], xy[:, 1:], starts


def synchronize(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize(device)


def rate(batches, steps: int, device: str) -> float:
    next(batches)  # warm-up: pinned buffers, threads, CUDA
    synchronize(device)
    t = time.perf_counter()
    for _ in range(steps):
        next(batches)
    synchronize(device)
    return steps / (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", default=None)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--device", default="cuda:0", help="cuda:N, or cpu (host memory: no GPU needed)")
    ap.add_argument("--file-tokens", type=int, default=1 << 28, help="tokens of the generated file")
    args = ap.parse_args()
    tmp = None
    path = args.tokens
    if path is None:
        tmp = tempfile.TemporaryDirectory()
        path = os.path.join(tmp.name, "tokens.bin")
        np.random.default_rng(0).integers(0, 50257, args.file_tokens, dtype=np.uint16).tofile(path)
    n_tokens = os.path.getsize(path) // 2
    with open(path, "rb") as warm:  # hot page cache for both loaders
        while warm.read(64 << 20):
            pass
    with ferry.open(path) as f:
        # Both loaders, the same offsets: the same batch.
        fx, fy, starts = next(ferry_batches(f, n_tokens, args.batch, args.block, args.device, np.random.default_rng(1)))
        mx, my, _ = next(memmap_batches(path, args.batch, args.block, args.device, np.random.default_rng(1)))
        assert torch.equal(token_ids(fx), mx) and torch.equal(token_ids(fy), my), "the loaders disagree"
        ferry_rate = rate(ferry_batches(f, n_tokens, args.batch, args.block, args.device, np.random.default_rng(2)),
                          args.steps, args.device)
    memmap_rate = rate(memmap_batches(path, args.batch, args.block, args.device, np.random.default_rng(2)), args.steps,
                       args.device)
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
