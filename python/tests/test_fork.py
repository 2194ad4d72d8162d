"""Worker processes forked after the parent read through Ferry (a PyTorch DataLoader's default on Linux,
after a checkpoint was loaded) read through Ferry too. fork() copies none of Ferry's threads: before the
fix, a child's first read of more than one task hung."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

SCRIPT = r"""
import multiprocessing, sys
import numpy as np
import ferry

path, size = sys.argv[1], int(sys.argv[2])

def read(offset):
    buf = np.full(size + 1, 0xA5, dtype=np.uint8)
    with ferry.open(path, task_size="64KiB", threads=4) as f:
        n = f.pread(buf[:size], offset).result()
    return n, bytes(buf[:size]), int(buf[size])

if __name__ == "__main__":
    read(0)  # the parent reads first: its workers exist when it forks
    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = pool.map_async(read, [0, 0, 0, 0]).get(timeout=60)
    want = open(path, "rb").read()[:size]
    for n, got, after in results:
        assert n == size and got == want and after == 0xA5, (n, after)
    print("ok", len(results))
"""


def test_forked_workers_read_after_the_parent_did(tmp_path):
    size = 1 << 20  # 16 tasks of 64 KiB
    path = tmp_path / "data.bin"
    np.random.default_rng(9).integers(0, 256, size, dtype=np.uint8).tofile(path)
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(path), str(size)], capture_output=True, text=True,
                         timeout=90, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0 and run.stdout.strip() == "ok 4", run.stdout + run.stderr
