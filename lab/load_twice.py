#!/usr/bin/env python3
"""Where a fresh process's checkpoint load spends its time: CUDA started and imports done first, then
ferry.safetensors.load of the same checkpoint twice in the process (the first pays Ferry's one-time set-up:
pinned staging, threads), each line with the load's own timings and the bytes / the H2D copy ceiling.

    PYTHONPATH=build-gpu/python python3 lab/load_twice.py CHECKPOINT [--device cuda:0]
"""

import argparse
import json
import time

import torch

import ferry.safetensors as st


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    torch.zeros(1, device=args.device)
    torch.cuda.synchronize()
    for attempt in ("first", "second"):
        started = time.perf_counter()
        result = st.load(args.checkpoint, args.device, progress=False)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        keep = {k: v for k, v in result.stats.items() if k.endswith("seconds") or k in ("bytes_read", "requests")}
        print(json.dumps({"load": attempt, "wall_seconds": seconds, **keep}))
        del result
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
