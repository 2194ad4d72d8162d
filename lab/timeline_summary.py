#!/usr/bin/env python3
"""Breaks requests down from a timeline written by lab/nvtx_timeline.cpp.

    timeline_summary.py TIMELINE [--skip N] [--count N] [--threads] [--json]

For each request range (start .. end), in ms from its start: when the first and the last worker began
their set-up, how long set-ups took, when the first task began and the last ended, how long the workers'
finish (the wait for their last copies) took and when the last ended, and the rest until the request's end
(completion: reports, callbacks). Prints the medians over requests, skipping the first N (default 1).
With --threads, also where the workers' time went from the first kept request's start to the last one's
end: the share of that span each spent in set-ups, tasks and finishes, and idle (for batches in flight
together, whose ranges overlap requests). --count keeps only that many requests after the skipped ones.
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


def thread_shares(kept, ranges):
    """Each worker's time from the first kept request's start to the last one's end, by range kind, as
    averages over the workers of fractions of that span."""
    begin, end = min(r[0] for r in kept), max(r[1] for r in kept)
    per = defaultdict(lambda: defaultdict(int))
    for b, e, message, thread in ranges:
        if b < begin or e > end:
            continue
        kind = "tasks" if message.startswith("ferry task") else message.replace("ferry worker ", "")
        per[thread][kind] += e - b
    span, workers = end - begin, len(per)
    shares = {k: sum(p[k] for p in per.values()) / workers / span for k in ("set-up", "tasks", "finish")}
    shares["idle"] = 1 - sum(shares.values())
    return {"workers": workers, "span_ms": span / 1e6, "shares": shares}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("timeline")
    ap.add_argument("--skip", type=int, default=1, help="requests to leave out at the start (warm-up)")
    ap.add_argument("--count", type=int, default=None, help="requests to keep after the skipped ones")
    ap.add_argument("--threads", action="store_true", help="also each worker's time by range kind")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    events = parse(args.timeline)
    ranges = ranges_per_thread(events)
    kept = requests(events)[args.skip:]
    if args.count is not None:
        kept = kept[:args.count]
    rows = [b for b in (breakdown(r, ranges) for r in kept) if b]
    if not rows:
        raise SystemExit(f"{args.timeline}: no complete request with worker ranges")
    medians = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "request"}
    threads = thread_shares(kept, ranges) if args.threads else None
    if args.json:
        print(json.dumps({"requests": len(rows), "first": rows[0]["request"], "median_ms": medians,
                          "threads": threads}, indent=1))
        return
    print(f"{len(rows)} requests like: {rows[0]['request']}")
    for k, v in medians.items():
        print(f"  {k:22s} {v:9.3f}" + ("" if k in ("workers", "tasks") else " ms"))
    if threads:
        print(f"  {threads['workers']} workers over {threads['span_ms']:.2f} ms: " +
              ", ".join(f"{k} {v:.3f}" for k, v in threads["shares"].items()))


if __name__ == "__main__":
    main()
