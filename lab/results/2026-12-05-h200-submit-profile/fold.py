#!/usr/bin/env python3
"""fold.py: `perf script -F tid,ip,sym` on stdin -> the stacks of one thread, folded (caller first, leaf last,
inlined frames kept), counted, the most frequent first. The thread: the one given, else the one with the most
samples in File::pread (the submitting thread)."""
import collections
import sys

want = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None
top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
tid, frames = None, []


by_thread = collections.defaultdict(collections.Counter)


def flush():
    if tid is not None:
        by_thread[tid][";".join(reversed(frames[:24]))] += 1


for line in sys.stdin:
    if not line.strip():
        flush()
        tid, frames = None, []
    elif not line.startswith((" ", "\t")):
        tid = line.split()[0]
    else:
        parts = line.split(None, 1)
        sym = parts[1].strip() if len(parts) > 1 else parts[0]
        frames.append(sym.split("+0x")[0])
flush()
if want is None:
    want = max(by_thread, key=lambda t: sum(n for k, n in by_thread[t].items() if "ferry::File::pread" in k),
               default=None)
stacks = by_thread.get(want, collections.Counter())
print("samples by thread:", ", ".join(f"{t} {sum(c.values())}" for t, c in
                                      sorted(by_thread.items(), key=lambda kv: -sum(kv[1].values()))[:20]))
total = sum(stacks.values())
print(f"thread {want}: {total} samples")
print("inclusive: the share of samples whose stack holds the function")
inclusive = collections.Counter()
for stack, n in stacks.items():
    for name in set(stack.split(";")):
        inclusive[name] += n
for name, n in inclusive.most_common(top):
    print(f"{n:6d} {100.0 * n / max(total, 1):5.1f}%  {name}")
print("stacks:")
for stack, n in stacks.most_common(top):
    print(f"{n:6d} {100.0 * n / max(total, 1):5.1f}%  {stack}")
