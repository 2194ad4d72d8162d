#!/usr/bin/env python3
"""Issue 21's goals, checked against what ferry_small_reads measured in one call.

    small_reads_goals.py --ceiling COPY_CONTENTION_TXT|GB_PER_S RESULT.json [RESULT.json ...] [--json]

RESULT files are ferry_small_reads --json-out files (hot and cold, any modes; passes of one mode are pooled).
The copy ceiling is ferry_copy_contention's output (its line without readers, 256 MiB copies on 2 streams)
or a number in GB/s. For each goal it prints every pass, the median, the reference it is held to, and
whether the median meets it; a goal with nothing measured says so rather than passing. The no-regression goal
(big reads, first reads, safetensors against d7cbac4) is measured elsewhere (scripts/gpu-session.sh ab).
"""

import argparse
import json
import re
import statistics
import sys

KIB, MIB = 1024, 1024 * 1024
GIB_IN_GB = 1.073741824

# Single requests with 64 in flight: the better of the plain loop and KvikIO 26.10 in the table (GB/s).
IN_FLIGHT_GB_PER_S = {4 * KIB: 2.1, 64 * KIB: 10.7, MIB: 26.0, 16 * MIB: 28.0}
ONE_AT_A_TIME_RATIO = 1.2      # of the plain loop's latency, every size
ONE_AT_A_TIME_4K_US = 13.0     # and 4 KiB in at most this many microseconds
BATCH_4K_M_PIECES = 4.0        # 4 KiB pieces, millions a second
BATCH_CEILING_SHARE = {64 * KIB: 0.8, MIB: 0.9}  # of the copy ceiling; 1 MiB and larger: 0.9
COLD_RAW_SHARE = 0.9           # cold random 4 KiB: of the disk's raw rate at the same depth


def copy_ceiling_gb_per_s(text_or_number):
    try:
        return float(text_or_number)
    except ValueError:
        pass
    with open(text_or_number) as f:
        for line in f:
            m = re.search(r"^\s*0 reader threads:.*?copy 256 MiB x 2 streams ([0-9.]+) GiB/s", line)
            if m:
                return float(m.group(1)) * GIB_IN_GB
    raise SystemExit(f"no line without readers in {text_or_number}: is it ferry_copy_contention's output?")


def load(paths):
    """Rows pooled by (cache, mode, size, (batch_bytes, batches_in_flight) for batch modes, else 0)."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for r in json.load(f):
                if not r.get("verified", False):
                    raise SystemExit(f"{path}: {r['mode']} at {r['size']} bytes was not verified byte for byte")
                batching = (r.get("batch_bytes", 0), r.get("batches_in_flight", 2))
                key = (r["cache"], r["mode"], r["size"], batching if r["mode"].startswith("batch") else 0)
                rows.setdefault(key, []).append(r)
    return rows


def size_name(size):
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def passes(rows, cache, mode, size, field, batching=None):
    """Every pass of (cache, mode, size), of one (batch size, batches in flight) when given."""
    return [r[field] for k, rs in rows.items() if k[:3] == (cache, mode, size) and batching in (None, k[3])
            for r in rs]


def verdict(goal, values, target, higher_is_better=True, reference=""):
    if not values:
        return {"goal": goal, "passes": [], "median": None, "target": target, "met": None, "reference": reference}
    median = statistics.median(values)
    met = median >= target if higher_is_better else median <= target
    return {"goal": goal, "passes": values, "median": median, "target": target, "met": met, "reference": reference}


def check(rows, ceiling):
    out = []
    for size, target in IN_FLIGHT_GB_PER_S.items():
        for mode in ("ferry", "ferry-mt"):
            plain = passes(rows, "hot", "plain", size, "gb_per_s")
            ref = f"plain loop {statistics.median(plain):.2f}" if plain else "plain loop not measured"
            out.append(verdict(f"{size_name(size)} single reads, 64 in flight ({mode}), GB/s",
                               passes(rows, "hot", mode, size, "gb_per_s"), target, reference=ref))
    for size in sorted({k[2] for k in rows if k[1] == "ferry-1"}) or [4 * KIB]:
        ferry = passes(rows, "hot", "ferry-1", size, "us_per_request")
        plain = passes(rows, "hot", "plain-1", size, "us_per_request")
        if plain:
            limit = ONE_AT_A_TIME_RATIO * statistics.median(plain)
            if size == 4 * KIB:
                limit = min(limit, ONE_AT_A_TIME_4K_US)
            out.append(verdict(f"{size_name(size)} one at a time, us", ferry, round(limit, 2), higher_is_better=False,
                               reference=f"plain loop {statistics.median(plain):.2f} us"))
        else:
            out.append(verdict(f"{size_name(size)} one at a time, us", [], None, reference="plain-1 not measured"))
    batches = sorted({(k[2], k[3]) for k in rows if k[:2] == ("hot", "batch")}) or [(4 * KIB, None)]
    for size, batching in batches:
        of = f" of {batching[0] // MIB} MiB, {batching[1]} in flight" if batching else ""
        if size < 64 * KIB:
            out.append(verdict(f"{size_name(size)} batches{of}, M pieces/s",
                               passes(rows, "hot", "batch", size, "m_requests_per_s", batching), BATCH_4K_M_PIECES))
            continue
        share = BATCH_CEILING_SHARE.get(size, 0.9 if size >= MIB else 0.8)
        out.append(verdict(f"{size_name(size)} batches{of}, GB/s", passes(rows, "hot", "batch", size, "gb_per_s", batching),
                           round(share * ceiling, 2), reference=f"{share} of the copy ceiling {ceiling:.2f}"))
    raw = passes(rows, "cold", "raw-host", 4 * KIB, "gb_per_s")
    for mode in ("batch", "ferry-mt"):
        got = passes(rows, "cold", mode, 4 * KIB, "gb_per_s")
        if raw:
            out.append(verdict(f"cold 4 KiB ({mode}), GB/s", got, round(COLD_RAW_SHARE * statistics.median(raw), 3),
                               reference=f"{COLD_RAW_SHARE} of raw O_DIRECT {statistics.median(raw):.3f}"))
        else:
            out.append(verdict(f"cold 4 KiB ({mode}), GB/s", [], None, reference="raw-host cold not measured"))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+")
    p.add_argument("--ceiling", required=True, help="ferry_copy_contention output, or GB/s")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = p.parse_args(argv)
    ceiling = copy_ceiling_gb_per_s(a.ceiling)
    goals = check(load(a.results), ceiling)
    if a.json:
        json.dump({"copy_ceiling_gb_per_s": ceiling, "goals": goals}, sys.stdout, indent=1)
        print()
        return 0
    print(f"copy ceiling {ceiling:.2f} GB/s")
    for g in goals:
        state = {True: "met", False: "NOT MET", None: "not measured"}[g["met"]]
        values = ", ".join(f"{v:.2f}" for v in g["passes"]) or "-"
        median = f"{g['median']:.2f}" if g["median"] is not None else "-"
        print(f"{g['goal']:<52} {values:<28} median {median:>7}  goal {g['target']}  {state}"
              + (f"  ({g['reference']})" if g["reference"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
