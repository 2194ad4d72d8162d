#!/usr/bin/env python3
"""Where a batch run's worker threads spend a steady stretch: for a timeline of lab/nvtx_timeline.cpp (plain or gzipped),
the threads busy in each kind of range, the ranges' durations, and how many tasks ran at once.
Usage: batch_timeline_summary.py TIMELINE [FIRST_BATCH LAST_BATCH]  (the batches, counted from the process's
first, that bound the stretch; default 8 and 32: past the untimed window and the timed run's first batches)."""
import collections
import gzip
import sys


def events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            yield line.rstrip("\n").split(" ", 4)


def main():
    path = sys.argv[1]
    first, last = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (8, 32)
    stacks, ranges, open_requests, requests = collections.defaultdict(list), [], {}, []
    for e in events(path):
        ns, thread, kind = int(e[0]), int(e[1]), e[2]
        message = e[4] if len(e) > 4 else ""
        if kind == "push":
            stacks[thread].append((ns, message))
        elif kind == "pop":
            start, message = stacks[thread].pop()
            ranges.append((start, ns, " ".join(message.split(" ")[:3])))
        elif kind == "start":
            open_requests[e[3]] = ns
        elif kind == "end":
            requests.append((open_requests.pop(e[3]), ns))
    requests.sort()
    w0, w1 = requests[first][0], requests[last][0]
    window_ms = (w1 - w0) / 1e6
    batches = last - first
    print(f"{path}: batches {first}..{last} started in {window_ms:.1f} ms: {batches * 64 * 2**20 / (window_ms / 1e3) / 1e9:.1f} GB/s "
          "(64 MiB batches)")
    busy, durations = collections.defaultdict(float), collections.defaultdict(list)
    for start, end, kind in ranges:
        a, b = max(start, w0), min(end, w1)
        if b > a:
            busy[kind] += (b - a) / 1e6
            durations[kind].append((end - start) / 1e6)
    for kind in sorted(busy):
        d = sorted(durations[kind])
        print(f"  {kind:24s} {busy[kind] / window_ms:5.2f} threads  n={len(d):4d}  ms p10 {d[len(d) // 10]:.3f} "
              f"p50 {d[len(d) // 2]:.3f} p90 {d[9 * len(d) // 10]:.3f}")
    edges = sorted([(max(s, w0), 1) for s, e, k in ranges if k.startswith("ferry task") and e > w0 and s < w1] +
                   [(min(e, w1), -1) for s, e, k in ranges if k.startswith("ferry task") and e > w0 and s < w1])
    running, last_t, share = 0, w0, collections.defaultdict(float)
    for t, step in edges:
        share[running] += t - last_t
        last_t, running = t, running + step
    total = sum(share.values())
    print(f"  tasks running at once: mean {sum(k * v for k, v in share.items()) / total:.1f}")
    d = sorted((e - s) / 1e6 for s, e in requests[first:last])
    print(f"  a batch from submission to completion: ms p50 {d[len(d) // 2]:.2f}")
    print("  the process's batches, start+duration ms: " +
          " ".join(f"{(s - requests[0][0]) / 1e6:.1f}+{(e - s) / 1e6:.1f}" for s, e in requests[:36]))


if __name__ == "__main__":
    main()
