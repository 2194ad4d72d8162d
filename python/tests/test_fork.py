"""Worker processes forked after the parent read through Ferry (a PyTorch DataLoader's default on Linux,
after a checkpoint was loaded) read through Ferry too, with Files of their own or one the parent opened.
fork() copies none of Ferry's threads: before the fix, a child's first read of more than one task hung. Nor
does CUDA survive a fork: where there is a GPU, the DataLoader's parent reads into it first, and its workers'
reads into CPU tensors must not call the driver (they failed with CUDA_ERROR_NOT_INITIALIZED before)."""

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
local = sys.argv[4] if len(sys.argv) > 4 else path  # the same bytes, where path is a URL
shared = ferry.open(path, task_size="64KiB", threads=4) if which == "parent's" else None

def read(offset):
    buf = np.full(size + 1, 0xA5, dtype=np.uint8)
    if shared is not None:  # a File the parent opened (a Dataset that opens its file in __init__)
        n = shared.pread(buf[:size], offset=offset).result()
    else:
        with ferry.open(path, task_size="64KiB", threads=4) as f:
            n = f.pread(buf[:size], offset=offset).result()
    return n, bytes(buf[:size]), int(buf[size])

if __name__ == "__main__":
    read(0)  # the parent reads first: its workers exist when it forks
    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = pool.map_async(read, [0, 0, 0, 0]).get(timeout=20)
    want = open(local, "rb").read()[:size]
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
                         timeout=40, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0 and run.stdout.strip() == "ok 4", run.stdout + run.stderr


# The same over HTTP, through a File the parent opened: the parent's pooled connections are the parent's (a child
# that took one sent its requests on the parent's socket, and the reads of both failed).
def test_forked_workers_read_an_object_through_the_parents_file(tmp_path):
    remote = pytest.importorskip("ferry.remote")
    if not remote.available():
        pytest.skip("Ferry was built without remote objects")
    from remote_servers import serve_directory

    size = 1 << 20
    root = tmp_path / "root"
    root.mkdir()
    np.random.default_rng(9).integers(0, 256, size, dtype=np.uint8).tofile(root / "data.bin")
    server = serve_directory(root, tmp_path / "nginx")
    try:
        run = subprocess.run([sys.executable, "-c", SCRIPT, server.url("data.bin"), str(size), "parent's",
                              str(root / "data.bin")], capture_output=True, text=True, timeout=40,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    finally:
        server.stop()
    assert run.returncode == 0 and run.stdout.strip() == "ok 4", run.stdout + run.stderr


# A parent whose threads (`workers`, started first; they end once `stop` is set) keep using Ferry while it forks
# children one after another, each running `child()` (its exit status: 0, or 3 for wrong bytes) under an alarm: a
# child that hangs ends with SIGALRM, and the script stops at the first child that did not exit 0. The part of each
# test (SETUP below) defines `workers` and `child`; sys.argv: the data file, the number of children.
BUSY_PARENT = r"""
import os, signal, sys, threading
import numpy as np
import ferry

path, forks = sys.argv[1], int(sys.argv[2])
stop = threading.Event()
SETUP
for worker in workers:
    worker.start()
for _ in range(forks):
    pid = os.fork()
    if pid == 0:
        signal.alarm(5)
        os._exit(child())
    _, status = os.waitpid(pid, 0)
    if status != 0:  # SIGALRM: it hung; exit status 3: wrong bytes
        print("child status", status)
        break
stop.set()
for worker in workers:
    worker.join()
print("ok")
"""


def run_busy_parent(setup: str, path, forks: int, timeout: int) -> None:
    run = subprocess.run([sys.executable, "-c", BUSY_PARENT.replace("SETUP", setup), str(path), str(forks)],
                         capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def data_file(tmp_path, seed: int):
    path = tmp_path / "data.bin"
    np.random.default_rng(seed).integers(0, 256, 1 << 16, dtype=np.uint8).tofile(path)
    return path


# Every request asks whether CUDA was loaded since the last one, which walks the loaded libraries; glibc holds its
# loader lock during the walk, and a child forked meanwhile found it held for good at its own first read. The walk
# is a small part of a Python read, so this catches that about every other run (2 of 4 without the fix, 1,000
# forks each); Fork.AChildForkedWhileAnotherThreadWalksTheLoadedLibrariesWalksThemToo (C++) catches it every time.
def test_children_forked_while_another_thread_of_the_parent_reads(tmp_path):
    setup = """
f = ferry.open(path)
want = open(path, "rb").read(4096)

def read_in_a_loop():
    buf = np.empty(4096, dtype=np.uint8)
    while not stop.is_set():
        f.pread(buf, offset=0).result()

workers = [threading.Thread(target=read_in_a_loop)]

def child():  # a File of its own
    buf = np.empty(4096, dtype=np.uint8)
    with ferry.open(path) as g:
        g.pread(buf, offset=0).result()
    return 0 if bytes(buf) == want else 3
"""
    run_busy_parent(setup, data_file(tmp_path, 5), 1000, timeout=60)


# Children that read through the parent's File while the parent's pool threads end its reads in flight: each end
# takes the File's count of requests (FileRequests), and a child forked while a thread held it hung at its first
# read, locking its copy (5 children of 6,000 hung here before the fix, one or more in each of 3 runs of 2,000).
# Those locks, and the blocking calls' position, are now made anew in a child. So is the Python lock that every
# result() takes to settle its future (ferry/_file.py): with the parent's threads settling theirs, a child forked
# meanwhile hung in its first result() (once in CI; 49 of about 15,000 children with two cores kept busy; none of
# 18,000 since).
def test_children_read_through_the_parents_file_while_its_reads_end(tmp_path):
    setup = """
import collections
f = ferry.open(path)
want = open(path, "rb").read(4096)

def keep_reads_in_flight():
    buffers = [np.empty(4096, dtype=np.uint8) for _ in range(16)]
    live, i = collections.deque(), 0
    while not stop.is_set():
        if len(live) == 16:
            live.popleft().result()
        live.append(f.pread(buffers[i % 16], offset=(i % 16) * 4096))
        i += 1
    for read in live:
        read.result()

workers = [threading.Thread(target=keep_reads_in_flight) for _ in range(4)]

def child():
    buf = np.empty(4096, dtype=np.uint8)
    f.pread(buf, offset=0).result()
    return 0 if bytes(buf) == want else 3
"""
    run_busy_parent(setup, data_file(tmp_path, 6), 2000, timeout=90)


# A child forked while a parent thread changed settings found the settings' lock held for good at its own first
# change (one of 300 children hung in each of 5 runs before the lock was made anew in the child; none in 4 since).
def test_children_change_settings_while_a_parent_thread_changes_them(tmp_path):
    setup = """
def change_settings():
    while not stop.is_set():
        ferry.config.update(task_size="2MiB")
        ferry.config.update(task_size="4MiB")

workers = [threading.Thread(target=change_settings)]

def child():
    ferry.config.update(task_size="1MiB")
    return 0 if ferry.config.task_size == 1 << 20 else 3
"""
    run_busy_parent(setup, data_file(tmp_path, 8), 300, timeout=60)


# KvikIO's API: a CuFile the parent opened, read with a per-call task_size by a parent thread and by children forked
# meanwhile (the CuFile's File for that task_size is looked up under its lock). A child forked while that thread
# held the lock hung at its first such read (in 4 of 9 runs of 300 children before the lock was made anew in the
# child; in none of 6 since).
def test_children_read_through_a_cufile_a_parent_thread_reads(tmp_path):
    setup = """
import ferry.kvikio as kvikio
f = kvikio.CuFile(path, "r")
want = open(path, "rb").read(4096)

def read_with_a_task_size_of_its_own():
    buf = np.empty(4096, np.uint8)
    while not stop.is_set():
        f.pread(buf, task_size=1 << 20).get()

workers = [threading.Thread(target=read_with_a_task_size_of_its_own)]

def child():
    buf = np.empty(4096, np.uint8)
    n = f.pread(buf, task_size=1 << 20).get()
    return 0 if n == 4096 and bytes(buf) == want else 3
"""
    run_busy_parent(setup, data_file(tmp_path, 7), 300, timeout=60)


TORCH_SCRIPT = r"""
import sys
import numpy as np
import torch
import ferry

path, size = sys.argv[1], int(sys.argv[2])

class Samples(torch.utils.data.Dataset):
    def __init__(self):
        self.file = ferry.open(path, task_size="64KiB", threads=4)
    def __len__(self):
        return 8
    def __getitem__(self, i):
        out = torch.empty(size // 8, dtype=torch.uint8)
        self.file.pread(out, offset=i * (size // 8)).result()
        return out

if __name__ == "__main__":
    data = Samples()
    first = data[0]  # the parent reads first
    if torch.cuda.is_available():  # a training process: Ferry read its checkpoint into the GPU before the fork
        on_gpu = torch.empty(size // 8, dtype=torch.uint8, device="cuda")
        data.file.pread(on_gpu).result()
        assert (on_gpu.cpu() == first).all(), "wrong bytes on the GPU"
    loader = torch.utils.data.DataLoader(data, batch_size=2, num_workers=2,
                                         multiprocessing_context="fork", timeout=20)
    got = torch.cat([b.reshape(-1) for b in loader]).numpy()
    assert (got == np.fromfile(path, dtype=np.uint8)).all(), "wrong bytes"
    print("ok")
"""


def test_a_torch_data_loader_with_forked_workers(tmp_path):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    size = 8 << 20  # 1 MiB a sample: 16 tasks each
    path = tmp_path / "data.bin"
    np.random.default_rng(10).integers(0, 256, size, dtype=np.uint8).tofile(path)
    run = subprocess.run([sys.executable, "-c", TORCH_SCRIPT, str(path), str(size)], capture_output=True,
                         text=True, timeout=45, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


# Regression (issue 49, 3): a child forked while the parent had reads in flight on a File hung for good in
# that File's close(): close waited for the parent's requests, which never end in the child (4 of 4 children
# on 189e30e). Now the child's close() waits only for the child's own requests: its reads work, then it
# closes, within its alarm.
CLOSE_SCRIPT = r"""
import os, signal, sys, threading, time
import numpy as np
import ferry
sys.path.insert(0, sys.argv[2])
from slow_io import SLOW, aliased_buffer

path = sys.argv[1]
f = ferry.open(path, **SLOW)
in_flight = [f.pread(aliased_buffer(1 << 30)) for _ in range(2)]  # slow: still running at the fork
time.sleep(0.1)
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        signal.alarm(15)  # a hang is a failure, not a stuck test
        buf = np.empty(4096, np.uint8)
        ok = f.pread(buf, offset=0).result() == 4096
        f.close()
        os._exit(0 if ok else 3)
    children.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
for fut in in_flight:
    fut.cancel()
f.close()
print("children", codes)
"""


def test_a_forked_child_closes_a_file_the_parent_is_still_reading(tmp_path):
    from slow_io import make_sparse

    path = tmp_path / "sparse.bin"
    make_sparse(path)
    tests = os.path.dirname(os.path.abspath(__file__))
    run = subprocess.run([sys.executable, "-c", CLOSE_SCRIPT, str(path), tests], capture_output=True, text=True,
                         timeout=50, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1] == "children [0, 0, 0]", run.stdout + run.stderr
