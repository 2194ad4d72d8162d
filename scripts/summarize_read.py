#!/usr/bin/env python3
"""One line per `ferry read --json` result: label, throughput, route summary, I/O counters."""
import json
import sys

label = sys.argv[1] if len(sys.argv) > 1 else ""
doc = json.load(sys.stdin)
report = doc["report"]
print(f"{label:<28} {doc['gib_per_s']:6.2f} GiB/s  {report['summary'][:150]}")
print(" " * 29, "io:", report["io"])
