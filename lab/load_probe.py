#!/usr/bin/env python3
"""Why a fresh process's first checkpoint load is slower than its second (issue 22): each mode runs in a
fresh process, CUDA started and imports done first, and times the same bytes twice in the process.

- ``pread-seq``: each shard's whole file read with File.pread into one torch buffer, one shard after another;
- ``pread-both``: the same, both shards' requests in flight at once;
- ``load``: ferry.safetensors.load of the checkpoint (what load_into_module reads through);
- ``load-warmed``: the same after ferry.warm_up ran on a thread for 80 ms (as ferry.torch.meta_parameters
  runs it while a model is built; constructions took 35-90 ms here).

    PYTHONPATH=build-gpu/python python3 lab/load_probe.py CHECKPOINT_DIR [--modes pread-seq,pread-both,load]
        [--out FILE]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import threading
import time


def child(mode: str, directory: str) -> None:
    import torch

    import ferry
    import ferry.safetensors as st

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    if mode == "load-warmed":
        threading.Thread(target=ferry.warm_up, args=(0,)).start()
        time.sleep(0.08)
    shards = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    for attempt in ("first", "second"):
        started = time.perf_counter()
        if mode.startswith("load"):
            st.load(directory, "cuda:0", progress=False)  # dropped at once: the second load allocates again
        else:
            files = [ferry.open(p) for p in shards]
            bufs = [torch.empty(os.path.getsize(p), dtype=torch.uint8, device="cuda") for p in shards]
            torch.cuda.synchronize()
            if mode == "pread-both":
                futures = [f.pread(b) for f, b in zip(files, bufs)]
                for fut in futures:
                    fut.result()
            else:
                for f, b in zip(files, bufs):
                    f.pread(b).result()
            setup = [f.report().get("notes", []) for f in files]
            for f in files:
                f.close()
            del bufs
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        nbytes = sum(os.path.getsize(p) for p in shards)
        line = {"mode": mode, "attempt": attempt, "seconds": round(seconds, 4), "gb_per_s": round(nbytes / seconds / 1e9, 2)}
        if not mode.startswith("load"):
            line["notes"] = setup
        print(json.dumps(line), flush=True)
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--modes", default="pread-seq,pread-both,load")
    ap.add_argument("--out", default=None, help="also append every line (and each failure's error) to this file")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.checkpoint)
        return 0
    failed = 0
    log = open(args.out, "a") if args.out else None
    for mode in args.modes.split(","):
        # Each mode's lines and, where it fails, its error are printed and kept in --out: a call whose
        # output is cut still brings the file back.
        run = subprocess.run([sys.executable, __file__, args.checkpoint, "--child", mode], capture_output=True,
                             text=True)
        text = run.stdout + (f"# {mode} failed (exit {run.returncode}):\n{run.stderr}" if run.returncode else "")
        print(text, end="", flush=True)
        if log:
            log.write(text)
            log.flush()
        failed += run.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
