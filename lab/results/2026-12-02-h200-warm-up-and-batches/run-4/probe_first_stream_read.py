# Untracked probe: does Ferry's first stream-ordered read of a process make a later CuPy call wait for
# the stream's earlier work? Variant argv[1]: "cold" (nothing of Ferry before), "warm_up" (ferry.warm_up(0)
# first), "read" (an unheld read_async first).
import sys, time, os, numpy as np, cupy as cp, ferry
variant = sys.argv[1]
path = sys.argv[2]
SIZE = 3 * 1024 * 1024 + 4097
stream = cp.cuda.Stream(non_blocking=True)
out = cp.empty(SIZE + 1, dtype=cp.uint8); out.fill(0); out.copy(); cp.cuda.Device().synchronize()
with ferry.open(path, compat_mode="on", task_size="1MiB") as f, stream:
    if variant == "warm_up":
        ferry.warm_up(0)
    if variant == "read":
        f.read_async(out, stream=stream, size=SIZE).result()
    held = time.monotonic()
    stream.launch_host_func(lambda _: time.sleep(1.0), None)
    out.fill(0x11)
    t = time.monotonic(); fut = f.read_async(out, stream=stream, size=SIZE); took = time.monotonic() - t
    t = time.monotonic(); after = out.copy(); copy_took = time.monotonic() - t
    since = time.monotonic() - held
    done = fut.done()
    stream.synchronize(); fut.result()
print(f"{variant}: read_async {took*1e3:.1f} ms, copy after {copy_took*1e3:.1f} ms, since hold {since:.3f} s, done early {done}")
