#!/usr/bin/env python3
"""Rows of ferry_small_reads outputs named KIND-TREE-ROUND.txt, one line per row and tree: every round's figure,
the median, and each tree's median against the first tree's (speed: >1 is faster, whichever the unit).

    rounds_summary.py RUNS_DIR TREE [TREE...]
"""
import collections
import pathlib
import re
import statistics
import sys

runs, trees = pathlib.Path(sys.argv[1]), sys.argv[2:]
row = re.compile(r"^(\d+\.\d+ [KMG]iB)\s+(\S+)\s+\d+\s+([\d.]+)\s+[\d.]+\s+([\d.]+)")
figures = collections.defaultdict(list)  # (kind, size, mode, tree) -> figures by round
for path in sorted(runs.glob("*.txt"), key=lambda p: int(p.stem.rsplit("-", 1)[1])):
    kind, tree, _ = path.stem.rsplit("-", 2)
    for line in path.read_text().splitlines():
        m = row.match(line)
        if not m:
            continue
        size, mode, gbps, us = m.groups()
        one_at_a_time = mode.endswith("-1")
        figures[(kind, size, mode, tree)].append(float(us) if one_at_a_time else float(gbps))
for kind, size, mode in sorted({k[:3] for k in figures}):
    unit = "us" if mode.endswith("-1") else "GB/s"
    base = None
    for tree in trees:
        vals = figures.get((kind, size, mode, tree), [])
        if not vals:
            continue
        med = statistics.median(vals)
        if base is None:
            base = med
        speed = (base / med if unit == "us" else med / base) if base else 0
        print(f"{kind:6} {size:9} {mode:9} {tree:4} {unit:4} " + " ".join(f"{v:7.2f}" for v in vals)
              + f"   median {med:7.2f}  x{speed:.2f}")
