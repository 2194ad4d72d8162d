#!/usr/bin/env python3
"""The first read in a fresh process (issue 11).

For each policy, fresh `ferry read FILE --device 0 --compat POLICY --json` processes on a file in the page
cache; per run: the whole process's wall time, Ferry's route planning (setup_seconds: File::prepare), the
read itself, and the one-time set-up step by step (CUDA, contexts, cuFile, pinned buffers, threads).
One JSON line per run on stdout, then a table of medians with each policy's setup+read against `on`'s.

    bench/first_read.py FERRY FILE [--repeats 5] [--policies auto,on,off] [--device 0]
"""

import argparse
import json
import statistics
import subprocess
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ferry")
    ap.add_argument("file")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--policies", default="auto,on,off")
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args()
    with open(a.file, "rb") as f:  # hot: in the page cache
        while f.read(64 << 20):
            pass
    rows = []
    for policy in a.policies.split(","):
        for _ in range(a.repeats):
            start = time.perf_counter()
            out = subprocess.run([a.ferry, "read", a.file, "--device", str(a.device), "--compat", policy, "--json"],
                                 capture_output=True, text=True)
            wall = time.perf_counter() - start
            if out.returncode != 0:
                print(json.dumps({"policy": policy, "error": out.stderr.strip()}))
                continue
            j = json.loads(out.stdout)
            steps = {k: round(v["seconds"], 4) for k, v in j["setup_costs"].items() if isinstance(v, dict) and v["count"]}
            row = {"policy": policy, "process_seconds": round(wall, 4), "setup_seconds": round(j["setup_seconds"], 4),
                   "read_seconds": round(j["seconds"], 4), "bytes": j["bytes"], "setup_steps": steps,
                   "summary": j["report"]["summary"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    med = {}
    for policy in a.policies.split(","):
        rs = [r for r in rows if r["policy"] == policy]
        if not rs:
            continue
        med[policy] = {k: statistics.median(r[k] for r in rs) for k in ("process_seconds", "setup_seconds", "read_seconds")}
        med[policy]["setup_plus_read"] = statistics.median(r["setup_seconds"] + r["read_seconds"] for r in rs)
    print(f"{'policy':8} {'process s':>10} {'setup s':>9} {'read s':>8} {'setup+read':>11} {'vs on':>7}", file=sys.stderr)
    for policy, m in med.items():
        ratio = m["setup_plus_read"] / med["on"]["setup_plus_read"] if "on" in med else float("nan")
        print(f"{policy:8} {m['process_seconds']:10.3f} {m['setup_seconds']:9.4f} {m['read_seconds']:8.4f} "
              f"{m['setup_plus_read']:11.4f} {ratio:7.2f}", file=sys.stderr)
    print(json.dumps({"medians": med}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
