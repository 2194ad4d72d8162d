"""Shared fixtures for the ferry Python tests.

Run against a build tree: PYTHONPATH=<build>/python /usr/bin/python3 -m pytest python/tests -q
(CTest's `python.pytest` does exactly that, with temporary files under <build>/python/test-tmp).
"""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import pytest

import ferry
from ferry import _ferry


# Every test runs under a watchdog: a test still running after this many seconds is taken as hung. The
# pending stream-ordered requests are printed (from a native thread, so a hang with the GIL held gets it
# too), then faulthandler prints every Python thread's stack and ends the process, so a hang is a red run
# with its cause, never a stuck one. A test that needs longer says so with @pytest.mark.watchdog(seconds).
WATCHDOG_SECONDS = float(os.environ.get("FERRY_TEST_WATCHDOG_S", "60"))


def pytest_configure(config):
    config.addinivalue_line("markers", "watchdog(seconds): the test's own hang limit (default 60 s)")


@pytest.fixture(autouse=True)
def _watchdog(request):
    marker = request.node.get_closest_marker("watchdog")
    limit = float(marker.args[0]) if marker else WATCHDOG_SECONDS
    pending = _ferry._PendingReport(max(limit - 1.0, 0.5), request.node.nodeid)
    faulthandler.dump_traceback_later(limit, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        pending.cancel()


@pytest.fixture(autouse=True)
def _restore_config():
    """Every test starts from, and leaves, the same process-wide configuration."""
    saved = _ferry.default_config()
    yield
    _ferry.set_default_config(saved)


@pytest.fixture
def make_file(tmp_path: Path) -> Callable[..., Tuple[Path, np.ndarray]]:
    """make_file(size, seed=0, name="data.bin") -> (path, the bytes as a uint8 array)."""

    def make(size: int, seed: int = 0, name: str = "data.bin") -> Tuple[Path, np.ndarray]:
        data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
        path = tmp_path / name
        path.write_bytes(data.tobytes())
        return path, data

    return make


def load_lab_tool(name: str):
    """A Python tool of lab/ (not a package) loaded as a module, for the tests of its verdicts."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "lab" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cli_path() -> Optional[str]:
    """The ferry CLI of the same build: $FERRY_CLI (set by CTest), else <build>/cli/ferry next to the
    package's build directory."""
    explicit = os.environ.get("FERRY_CLI")
    if explicit:
        return os.path.abspath(explicit) if os.access(explicit, os.X_OK) else None  # tests run it from other folders
    guess = Path(ferry.__file__).resolve().parents[2] / "cli" / "ferry"
    return str(guess) if os.access(guess, os.X_OK) else None


_CLI_FLAGS = {"compat_mode": "--compat", "task_size": "--task-size", "direct_io": "--direct-io", "threads": "--threads"}


def cli_read(path: Path, settings: Dict[str, object], device: Optional[int] = None) -> Tuple[int, Optional[dict], str]:
    """Runs `ferry read PATH --json` with the same settings: (exit status, its report or None, stderr).
    Skips the test when the CLI is missing."""
    cli = cli_path()
    if cli is None:
        pytest.skip("the ferry CLI was not found (set FERRY_CLI or build with FERRY_BUILD_CLI=ON)")
    cmd = [cli, "read", str(path), "--json"]
    for name, value in settings.items():
        cmd += [_CLI_FLAGS[name], str(value)]
    if device is not None:
        cmd += ["--device", str(device)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    report = json.loads(out.stdout)["report"] if out.returncode == 0 else None
    return out.returncode, report, out.stderr.strip()


def cli_read_report(path: Path, settings: Dict[str, object], device: Optional[int] = None) -> dict:
    """The route report `ferry read --json` prints for the same file and settings (fails the test when
    the CLI fails)."""
    rc, report, stderr = cli_read(path, settings, device)
    if report is None:
        pytest.fail(f"`ferry read {path} --json` with {settings} exited {rc}: {stderr}")
    return report


def route_signature(report: dict) -> dict:
    """What must match between two reports of the same request: operations and bytes per route, and
    the (route, reason, detail, ops) rows. Times and page-cache counters may differ between runs."""
    return {
        "routes": {name: (r["ops"], r["bytes"]) for name, r in report["routes"].items()},
        "reasons": sorted((r["route"], r["reason"], r["detail"], r["ops"]) for r in report["reasons"]),
        "total_ops": report["total_ops"],
        "total_bytes": report["total_bytes"],
    }


# ---- GPU frameworks: each fixture skips, in the framework's own words, where it cannot be used.


@pytest.fixture(scope="session")
def cp():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver, no device, driver too old: CuPy's own words
        pytest.skip(f"CuPy finds no usable GPU: {e}")
    if count == 0:
        pytest.skip("CuPy finds no GPU")
    return cupy


@pytest.fixture(scope="session")
def torch():
    t = pytest.importorskip("torch", reason="PyTorch is not installed")
    return t


@pytest.fixture(scope="session")
def torch_cuda(torch):
    if not torch.cuda.is_available():
        pytest.skip("PyTorch finds no usable GPU (torch.cuda.is_available() is False)")
    return torch
