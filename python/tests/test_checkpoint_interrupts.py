"""Ctrl-C during a checkpoint load or save stops it within 0.2 s and leaves nothing half-written (issue 48).

A checkpoint is one run of tensors, so its load is one request: before, Ctrl-C waited for that whole request
(2.5-5.1 s for 2 GiB on the 2-core machine), since a cancelled load only stopped starting new requests. The
load now cancels its requests in flight at their next task too. Real SIGINTs, sent by a timer thread of a
child process (as a terminal sends them); transfers are slow enough to be caught in the middle (slow_io.py:
one 4 KiB task at a time, over a sparse file for loads).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ferry

PROMPT_S = 0.2
BIG = 2 << 30  # the tensor's bytes: a hole in the file, read one 4 KiB task at a time


def sparse_checkpoint(path: Path) -> Path:
    header = json.dumps({"big": {"dtype": "U8", "shape": [BIG], "data_offsets": [0, BIG]}}).encode()
    header += b" " * ((-(8 + len(header))) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + BIG)
    return path


_CHILD = r"""
import json, os, signal, sys, threading, time
import numpy as np
import ferry, ferry.safetensors as fst
from slow_io import SLOW, SLOW_WRITE

scenario, path = sys.argv[1], sys.argv[2]
out = {"scenario": scenario}
sent = {}

def ctrl_c_soon(delay=0.3):
    def fire():
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)
    t = threading.Timer(delay, fire)
    t.daemon = True
    t.start()

try:
    if scenario == "load":
        ctrl_c_soon()
        fst.load(path, "cpu", framework="numpy", progress=False, **SLOW)
    elif scenario == "load_into_module":
        import torch, ferry.torch as ft
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.big = torch.nn.Parameter(torch.empty(2 << 30, dtype=torch.uint8), requires_grad=False)
        with ft.meta_parameters():
            m = M()
        ctrl_c_soon()
        ft.load_into_module(m, path, device="cpu", **SLOW)
    elif scenario == "save":
        data = np.ones(512 << 20, np.uint8)
        ctrl_c_soon(0.2)
        fst.save_file({"a": data}, path, **SLOW_WRITE)
    out["finished"] = True
except KeyboardInterrupt:
    out["latency"] = time.monotonic() - sent["at"]
out["leftovers"] = sorted(n for n in os.listdir(os.path.dirname(path)) if n.startswith(".ferry"))
print(json.dumps(out), flush=True)
"""


def _env() -> dict:
    package = Path(ferry.__file__).resolve().parents[1]
    tests = Path(__file__).resolve().parent
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(package), str(tests)]))


def _run(scenario: str, path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, scenario, str(path)], capture_output=True, text=True,
                          timeout=50, env=_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stdout + proc.stderr
    report = json.loads(lines[-1])
    if report.get("finished"):
        pytest.skip("the transfer finished before the Ctrl-C: this machine is too fast to tell")
    return report


def _assert_prompt(attempt) -> None:
    """A Ctrl-C stopped `attempt()`'s transfer within PROMPT_S, in the first attempt or a second one. Once in
    ten CI runs, on the 2-core machine with the C++ tests running beside, a load's took 0.365 s, the main thread
    waiting to be scheduled; a slow first attempt is run again, so a stop that is slow every time still fails."""
    reports = [attempt()]
    if reports[0]["latency"] >= PROMPT_S:
        reports.append(attempt())
    assert reports[-1]["latency"] < PROMPT_S, reports


@pytest.mark.parametrize("scenario", ["load", "load_into_module"])
def test_ctrl_c_stops_a_one_request_load_within_a_fifth_of_a_second(tmp_path, scenario):
    if scenario == "load_into_module":
        pytest.importorskip("torch", reason="PyTorch is not installed")
    _assert_prompt(lambda: _run(scenario, sparse_checkpoint(tmp_path / "sparse.safetensors")))


def test_ctrl_c_stops_a_save_within_a_fifth_of_a_second_and_leaves_no_file(tmp_path):
    target = tmp_path / "out" / "model.safetensors"
    target.parent.mkdir()
    def attempt() -> dict:
        report = _run("save", target)
        assert not target.exists(), "a half-written file took the target's name"
        assert report["leftovers"] == [], report
        return report
    _assert_prompt(attempt)


# Regression (issue 49, 4): where O_TMPFILE is missing (FERRY_CLI_TEST_NO_O_TMPFILE=1 forces that way), a
# process killed during a save left its full-size hidden temporary for good (16 of 20 SIGKILLs on 189e30e).
# A SIGTERM with its default action now ends the save cleanly (exit status 143, no temporary left), and what a
# SIGKILL leaves is removed by the next save into the directory, which says so.
_SAVER = r"""
import sys
import numpy as np
import ferry.safetensors as fst
from slow_io import SLOW_WRITE
print("saving", flush=True)
fst.save_file({"a": np.ones(256 << 20, np.uint8)}, sys.argv[1], **SLOW_WRITE)
print("saved", flush=True)
"""


def _start_saver(target: Path) -> subprocess.Popen:
    env = dict(_env(), FERRY_CLI_TEST_NO_O_TMPFILE="1")
    proc = subprocess.Popen([sys.executable, "-c", _SAVER, str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout.readline().strip() == "saving"
    deadline = time.monotonic() + 20
    while not any(n.startswith(".ferry-") for n in os.listdir(target.parent)):  # its temporary exists
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.01)
    return proc


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_a_killed_save_leaves_no_temporary_for_good(tmp_path, signal_name):
    import signal
    target = tmp_path / "out" / "model.safetensors"
    target.parent.mkdir()
    proc = _start_saver(target)
    proc.send_signal(getattr(signal, signal_name))
    rc = proc.wait(timeout=20)
    left = sorted(n for n in os.listdir(target.parent) if n.startswith(".ferry-"))
    if signal_name == "SIGTERM":
        assert rc == 143, proc.stderr.read()
        assert left == [], "a SIGTERM left the temporary"
    else:
        assert rc == -9 and len(left) == 1
        result = fst_save_small(target.parent / "next.safetensors")
        assert os.listdir(target.parent) == ["next.safetensors"]
        assert any("removed 1 temporary file(s) of earlier saves whose processes ended" in n for n in result.notes)
    assert not target.exists()


def fst_save_small(path: Path):
    import numpy as np
    from ferry import safetensors as fst

    os.environ["FERRY_CLI_TEST_NO_O_TMPFILE"] = "1"
    try:
        return fst.save_file({"b": np.zeros(16, np.uint8)}, path)
    finally:
        del os.environ["FERRY_CLI_TEST_NO_O_TMPFILE"]
