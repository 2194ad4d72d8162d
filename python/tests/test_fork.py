"""Worker processes forked after the parent read through Ferry (a PyTorch DataLoader's default on Linux,
after a checkpoint was loaded) read through Ferry too, with Files of their own or one the parent opened.
fork() copies none of Ferry's threads: before the fix, a child's first read of more than one task hung."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = r"""
import multiprocessing, sys
import numpy as np
import ferry

path, size, which = sys.argv[1], int(sys.argv[2]), sys.argv[3]
shared = ferry.open(path, task_size="64KiB", threads=4) if which == "parent's" else None

def read(offset):
    buf = np.full(size + 1, 0xA5, dtype=np.uint8)
    if shared is not None:  # a File the parent opened (a Dataset that opens its file in __init__)
        n = shared.pread(buf[:size], offset).result()
    else:
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
    assert read(0)[0] == size  # and the parent goes on
    print("ok", len(results))
"""


@pytest.mark.parametrize("which", ["own", "parent's"])
def test_forked_workers_read_after_the_parent_did(tmp_path, which):
    size = 1 << 20  # 16 tasks of 64 KiB
    path = tmp_path / "data.bin"
    np.random.default_rng(9).integers(0, 256, size, dtype=np.uint8).tofile(path)
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(path), str(size), which], capture_output=True, text=True,
                         timeout=90, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0 and run.stdout.strip() == "ok 4", run.stdout + run.stderr
