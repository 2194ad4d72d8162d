"""When does a stream-ordered read run? Prints a timeline per try: the host function that holds the stream
(start, end), read_async's return, whether the future was done then, and when it became done. A diagnosis
aid for python/tests/test_issue_13_gpu.py on the GPU machine.

    python3 lab/stream_order_probe.py FILE [TRIES]
"""

import sys
import time

import cupy as cp

import ferry

path = sys.argv[1]
tries = int(sys.argv[2]) if len(sys.argv) > 2 else 5
size = 3 * 1024 * 1024 + 4097
t0 = time.monotonic()


def at() -> float:
    return round((time.monotonic() - t0) * 1e3, 2)


for compat in ("on", "auto", "on"):
    for i in range(tries):
        marks = {}
        stream = cp.cuda.Stream(non_blocking=True)

        def hold(_):
            marks["hold_start"] = at()
            time.sleep(0.3)
            marks["hold_end"] = at()

        with ferry.open(path, compat_mode=compat, task_size="1MiB") as f, stream:
            out = cp.empty(size + 1, dtype=cp.uint8)
            stream.launch_host_func(hold, None)
            out.fill(0x11)
            marks["call"] = at()
            fut = f.read_async(out, stream=stream, size=size)
            marks["returned"] = at()
            marks["done_at_return"] = fut.done()
            marks["bytes_at_return"] = fut.bytes_done
            while not fut.done():
                time.sleep(0.001)
            marks["done"] = at()
            stream.synchronize()
            marks["result"] = fut.result()
        print(compat, i, marks, flush=True)
