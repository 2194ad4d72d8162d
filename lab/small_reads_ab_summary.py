#!/usr/bin/env python3
"""small_reads_ab_summary.py OUT_DIR: one line per (cache, size, mode, other tree) of lab/small_reads_ab.sh's
rounds, that tree's figures beside this one's ("new") and their ratio as a speed (GB/s new / other; for the
one-at-a-time `-1` modes, us other / new), and whether every byte was checked."""

import collections
import glob
import json
import os
import re
import sys


def main(out_dir: str) -> None:
    for cache in ("hot", "cold"):
        rows = collections.defaultdict(lambda: collections.defaultdict(list))
        for path in sorted(glob.glob(os.path.join(out_dir, f"{cache}-*-*.json"))):
            which = re.match(rf"{cache}-(\w+)-\d+\.json$", os.path.basename(path))
            if not which:
                continue
            for e in json.load(open(path)):
                latency = e["mode"].endswith("-1")
                rows[(e["size"], e["mode"])][which.group(1)].append(
                    (e["us_per_request"] if latency else e["gb_per_s"], e["verified"], latency))
        for (size, mode), by in sorted(rows.items()):
            new = by["new"]
            for other in sorted(name for name in by if name != "new"):
                them = by[other]
                latency = (them + new)[0][2]
                speed = [(o[0] / n[0]) if latency else (n[0] / o[0]) for o, n in zip(them, new)]
                verified = all(v for _, v, _ in them + new)
                print(f"{cache:4} {size:>9} {mode:9} {'us' if latency else 'GB/s':4} "
                      f"{other} {' '.join(f'{v:7.2f}' for v, _, _ in them)}  new {' '.join(f'{v:7.2f}' for v, _, _ in new)}  "
                      f"new/{other} speed {' '.join(f'{s:.2f}' for s in speed)}  verified {verified}")


if __name__ == "__main__":
    main(sys.argv[1])
