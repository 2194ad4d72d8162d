#!/usr/bin/env python3
"""Issue 50's goal rows from one goals call's folder (lab/results/*goals*/calls.sh writes it).

    issue50_goals.py RESULTS_DIR [--tree tree] [--base old]

RESULTS_DIR holds, for the tree and the baseline, round by round: ferry-bench's hot 8 GiB runs (NAME-hot8-R.txt),
ferry_small_reads' 16 MiB in flight (NAME-16m-R.txt), batches (NAME-b64-R.txt, NAME-b256-R.txt), singles 64 in
flight beside the plain loop (NAME-singles-R.txt) and one read at a time (NAME-one-R.txt). Prints each row's
rounds, their median and the goal. Small-read rows move between rounds of one binary, so a goal is judged on the
median, never on one round.
"""

import argparse
import pathlib
import re
import statistics

GIB_IN_GB = 1.073741824


def probe_row(path, mode, size=None):
    """(GB/s, us a request) of `mode` (at `size`, as printed: '4.00KiB') in a ferry_small_reads output, or None."""
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) > 7 and f[2] == mode and (size is None or f[0] + f[1] == size):
            return float(f[4]), float(f[6])
    return None


def bench_medians(path):
    """(Ferry's staged hot read, the copy ceiling) in GiB/s from ferry-bench's output; either may be None."""
    if not path.exists():
        return None, None
    text = path.read_text()
    read = re.search(r"\] staged hot \d+t \S+: median ([\d.]+)", text)
    ceiling = re.search(r"\] copy \S+: median ([\d.]+)", text)  # the best of its shapes
    return (float(read.group(1)) if read else None), (float(ceiling.group(1)) if ceiling else None)


def rounds(folder, name, kind):
    found = sorted(folder.glob(f"{name}-{kind}-*.txt"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    return [(int(p.stem.rsplit("-", 1)[1]), p) for p in found]


def summary(label, values, goal=None, at_least=True):
    values = [v for v in values if v is not None]
    if not values:
        return f"{label}: nothing measured"
    median = statistics.median(values)
    shown = ", ".join(f"{v:.3f}" for v in values)
    verdict = ""
    if goal is not None:
        met = median >= goal if at_least else median <= goal
        verdict = f"; goal {'>=' if at_least else '<='} {goal}: {'met' if met else 'NOT met'}"
    return f"{label}: {shown} (median {median:.3f}{verdict})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=pathlib.Path)
    ap.add_argument("--tree", default="tree")
    ap.add_argument("--base", default="old")
    a = ap.parse_args(argv)
    tree, base = a.tree, a.base

    ceilings = {}
    hot, hot_base = [], []
    for r, p in rounds(a.folder, tree, "hot8"):
        read, ceiling = bench_medians(p)
        ceilings[r] = ceiling
        if read and ceiling:
            hot.append(read / ceiling)
        base_read, _ = bench_medians(a.folder / f"{base}-hot8-{r}.txt")
        if base_read and ceiling:
            hot_base.append(base_read / ceiling)
    print(summary("hot 8 GiB, of the copy ceiling", hot, 0.95))
    print(summary(f"  {base}", hot_base))

    big, big_base = [], []
    for r, p in rounds(a.folder, tree, "16m"):
        ceiling_gb = ceilings.get(r) and ceilings[r] * GIB_IN_GB
        row, row_base = probe_row(p, "ferry"), probe_row(a.folder / f"{base}-16m-{r}.txt", "ferry")
        if ceiling_gb and row:
            big.append(row[0] / ceiling_gb)
        if ceiling_gb and row_base:
            big_base.append(row_base[0] / ceiling_gb)
    print(summary("16 MiB, 64 in flight, of the copy ceiling", big, 0.89))
    print(summary(f"  {base}", big_base))

    for kind, batch in (("b64", "64 MiB"), ("b256", "256 MiB")):
        for size in ("64.00KiB", "1.00MiB"):
            ratios = []
            for r, p in rounds(a.folder, tree, kind):
                row, row_base = probe_row(p, "batch", size), probe_row(a.folder / f"{base}-{kind}-{r}.txt", "batch", size)
                if row and row_base:
                    ratios.append(row[0] / row_base[0])
            print(summary(f"{size} pieces in {batch} batches, {tree} / {base} (goal: no regression)", ratios))

    for size, goal in (("4.00KiB", 1.0), ("1.00MiB", 1.0)):
        for name in (tree, base):
            ratios = []
            for r, p in rounds(a.folder, name, "singles"):
                row, loop = probe_row(p, "ferry", size), probe_row(p, "plain", size)
                if row and loop:
                    ratios.append(row[0] / loop[0])
            print(summary(f"{size}, 64 in flight from one thread, {name} / the loop", ratios, goal if name == tree else None))

    for name in (tree, base):
        ratios = []
        for r, p in rounds(a.folder, name, "one"):
            row, loop = probe_row(p, "ferry-1"), probe_row(p, "plain-1")
            if row and loop:
                ratios.append(row[1] / loop[1])
        print(summary(f"one 4 KiB read at a time, {name} / the loop's latency", ratios,
                      1.1 if name == tree else None, at_least=False))


if __name__ == "__main__":
    main()
