"""The examples run as their docstrings say, on this machine: examples/token_windows.py on the CPU (host
memory) everywhere, and on GPU 0 where PyTorch sees one. Before, it needed torch >= 2.3 (torch.uint16) and
called CUDA behind its --device cpu option."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ferry

torch = pytest.importorskip("torch", reason="the example uses PyTorch")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(Path(ferry.__file__).resolve().parents[1]))


@pytest.mark.watchdog(120)
@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_token_windows_runs_and_both_loaders_agree(device):
    if device != "cpu" and not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device here")
    run = subprocess.run([sys.executable, str(EXAMPLES / "token_windows.py"), "--device", device, "--steps", "3",
                          "--batch", "8", "--block", "128", "--file-tokens", str(1 << 20)],
                         capture_output=True, text=True, timeout=100, env=_env())
    assert run.returncode == 0, run.stderr
    assert "ferry pread_batch:" in run.stdout and "ratio:" in run.stdout, run.stdout
