#!/usr/bin/env python3
"""Breaks requests down from a timeline written by bench/tools/nvtx_timeline.cpp.

    timeline_summary.py TIMELINE [--skip N] [--json]

For each request range (start .. end), in ms from its start: when the first and the last worker began
their set-up, how long set-ups took, when the first task began and the last ended, how long the workers'
finish (the wait for their last copies) took and when the last ended, and the rest until the request's end
(completion: reports, callbacks). Prints the medians over requests, skipping the first N (default 1).
"""

import argparse
import json
import statistics
from collections import defaultdict


def parse(path):
    events = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split(" ", 4)
            if len(parts) < 4:
                continue
            ns, thread, kind, rid = int(parts[0]), int(parts[1]), parts[2], int(parts[3])
            events.append((ns, thread, kind, rid, parts[4] if len(parts) > 4 else ""))
    events.sort(key=lambda e: e[0])
    return events


def ranges_per_thread(events):
    """Push/pop pairs as (begin_ns, end_ns, message), from each thread's stack."""
    stacks, out = defaultdict(list), []
    for ns, thread, kind, _, message in events:
        if kind == "push":
            stacks[thread].append((ns, message))
        elif kind == "pop" and stacks[thread]:
            begin, message = stacks[thread].pop()
            out.append((begin, ns, message, thread))
    return out


def requests(events):
    starts, out = {}, []
    for ns, _, kind, rid, message in events:
        if kind == "start":
            starts[rid] = (ns, message)
        elif kind == "end" and rid in starts:
            begin, message = starts.pop(rid)
            out.append((begin, ns, message))
    return out


def breakdown(request, ranges):
    begin, end, message = request
    inside = [r for r in ranges if begin <= r[0] <= end]
    ms = lambda ns: (ns - begin) / 1e6
    setups = [r for r in inside if r[2] == "ferry worker set-up"]
    tasks = [r for r in inside if r[2].startswith("ferry task")]
    finishes = [r for r in inside if r[2] == "ferry worker finish"]
    if not setups or not tasks or not finishes:
        return None
    return {
        "request": message,
        "workers": len(setups),
        "tasks": len(tasks),
        "first_worker_begins": ms(min(r[0] for r in setups)),
        "last_worker_begins": ms(max(r[0] for r in setups)),
        "set_up_max": max(r[1] - r[0] for r in setups) / 1e6,
        "first_task_begins": ms(min(r[0] for r in tasks)),
        "task_median": statistics.median(r[1] - r[0] for r in tasks) / 1e6,
        "last_task_ends": ms(max(r[1] for r in tasks)),
        "first_finish_begins": ms(min(r[0] for r in finishes)),
        "finish_max": max(r[1] - r[0] for r in finishes) / 1e6,
        "last_finish_ends": ms(max(r[1] for r in finishes)),
        "request_ends": ms(end),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("timeline")
    ap.add_argument("--skip", type=int, default=1, help="requests to leave out at the start (warm-up)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    events = parse(args.timeline)
    ranges = ranges_per_thread(events)
    rows = [b for b in (breakdown(r, ranges) for r in requests(events)) if b][args.skip:]
    if not rows:
        raise SystemExit(f"{args.timeline}: no complete request with worker ranges")
    medians = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "request"}
    if args.json:
        print(json.dumps({"requests": len(rows), "first": rows[0]["request"], "median_ms": medians}, indent=1))
        return
    print(f"{len(rows)} requests like: {rows[0]['request']}")
    for k, v in medians.items():
        print(f"  {k:22s} {v:9.3f}" + ("" if k in ("workers", "tasks") else " ms"))


if __name__ == "__main__":
    main()
