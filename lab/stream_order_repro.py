#!/usr/bin/env python3
"""Issue 20's two reports as a user wrote them, each in a fresh process under a time limit, against any
build of the Python module (PYTHONPATH): says for each whether it ended or hung, and for a hang what every
thread of the process was doing (Python stacks from faulthandler; for every thread its name, the system
call it sleeps in and the kernel's wait channel from /proc), so that an old build's hang has a cause.

    PYTHONPATH=<build>/python python3 lab/stream_order_repro.py --dir DIR [--limit 20] [--env K=V]

Each case runs for compat_mode on and off; --env adds environment variables to the child (for example
CUDA_DEVICE_MAX_CONNECTIONS=32, to see whether a hang needs streams to share hardware queues).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

CHILD = r"""
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)
import numpy as np, ferry
case, mode, path = sys.argv[1], sys.argv[2], sys.argv[3]
size = 256 << 20
if case == "pytorch":
    import torch
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        buf = torch.empty(size, dtype=torch.uint8, device="cuda")
        buf.fill_(0xEE)
        f = ferry.open(path, compat_mode=mode)
        fut = f.read_async(buf, stream=s)
        total = buf.to(torch.int64).sum()
        buf.fill_(0)
        print("queued", flush=True)
        s.synchronize()
        fut.result()
        f.close()
    print("ended", int(total), flush=True)
else:
    import cupy as cp
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(16)]
    dst = cp.empty(size, dtype=cp.uint8)
    out = cp.empty(size, dtype=cp.uint8)
    f = ferry.open(path, compat_mode=mode)
    futs = []
    step = size // 16
    for i, st in enumerate(streams):
        a, b = i * step, (i + 1) * step
        futs.append(f.read_async(dst[a:b], offset=a, stream=st))
        with st:
            out[a:b] = dst[a:b]
    print("queued", flush=True)
    for st in streams:
        st.synchronize()
    for fu in futs:
        fu.result()
    f.close()
    print("ended", flush=True)
"""


def threads_of(pid: int) -> list:
    rows = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        base = f"/proc/{pid}/task/{tid}"
        row = {"tid": int(tid)}
        for name in ("comm", "wchan", "syscall"):
            try:
                with open(f"{base}/{name}") as fh:
                    row[name] = fh.read().strip()
            except OSError as e:
                row[name] = f"({e.strerror})"
        rows.append(row)
    return rows


def run_case(case: str, mode: str, path: str, limit: float, env: dict) -> dict:
    child_env = dict(os.environ, **env)
    started = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", CHILD, case, mode, path], env=child_env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=limit)
        return {"case": case, "compat_mode": mode, "env": env, "ended": p.returncode == 0,
                "seconds": round(time.monotonic() - started, 2), "stdout": out.strip()[-400:],
                "stderr": err.strip()[-1500:]}
    except subprocess.TimeoutExpired:
        threads = threads_of(p.pid)
        p.send_signal(signal.SIGUSR1)  # faulthandler: every Python thread's stack
        time.sleep(1.0)
        p.kill()
        out, err = p.communicate()
        return {"case": case, "compat_mode": mode, "env": env, "ended": False, "hung_after_s": limit,
                "threads": threads, "python_stacks": err.strip()[-6000:], "stdout": out.strip()[-400:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--limit", type=float, default=20.0)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--cases", default="pytorch,cupy")
    ap.add_argument("--modes", default="on,off")
    args = ap.parse_args()
    env = dict(kv.split("=", 1) for kv in args.env)
    path = os.path.join(args.dir, "repro-256MiB.bin")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(os.urandom(256 << 20))
    for case in args.cases.split(","):
        for mode in args.modes.split(","):
            r = run_case(case, mode, path, args.limit, env)
            verdict = "ended" if r["ended"] else ("HUNG" if "hung_after_s" in r else "FAILED")
            print(f"{case} compat={mode} {env or ''}: {verdict}", flush=True)
            print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
