"""HTTP servers on loopback for the Python remote and dask tests: nginx serves a directory on a free port,
stopped at the end; scripts/install-deps.sh installs it. Where nginx is missing (the GPU machine),
serve_directory() falls back to tests/remote/range_server.py, a standard-library range server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

NGINX = "/usr/sbin/nginx"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Nginx:
    def __init__(self, root: Path, work: Path) -> None:
        if not os.access(NGINX, os.X_OK):
            pytest.skip(f"{NGINX} not found: install nginx (scripts/install-deps.sh does)")
        work.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            self.port = _free_port()
            conf = work / "nginx.conf"
            w = str(work)
            # As root, nginx's workers would run as nobody, who cannot enter pytest's 0700 temp directories.
            user = "user root;\n" if os.geteuid() == 0 else ""
            conf.write_text(
                user + f"daemon off;\nmaster_process on;\nworker_processes 1;\npid {w}/nginx.pid;\nerror_log {w}/error.log;\n"
                "events { worker_connections 1024; }\n"
                f"http {{\n access_log off;\n client_body_temp_path {w}/cb;\n proxy_temp_path {w}/px;\n"
                f" fastcgi_temp_path {w}/fc;\n uwsgi_temp_path {w}/uw;\n scgi_temp_path {w}/sc;\n"
                " default_type application/octet-stream;\n sendfile on;\n keepalive_requests 1000000;\n"
                f" server {{ listen 127.0.0.1:{self.port}; root {root}; }}\n}}\n"
            )
            self.proc = subprocess.Popen(
                [NGINX, "-p", w, "-c", str(conf), "-e", f"{w}/error.log"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            deadline = time.time() + 5
            while time.time() < deadline and self.proc.poll() is None:
                if _listening(self.port):
                    return
                time.sleep(0.02)
            self.stop()
        raise RuntimeError(f"nginx did not start: {(work / 'error.log').read_text(errors='replace')}")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


RANGE_SERVER = Path(__file__).resolve().parents[2] / "tests" / "remote" / "range_server.py"


class _ScriptServer:
    """A standard-library server script of tests/remote in a child process: it prints "port N" once it
    listens on 127.0.0.1:N and stops when its stdin closes."""

    def __init__(self, script: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            ["/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable, str(script), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "port":
            self.stop()
            raise RuntimeError(f"{script} did not start (printed {line!r})")
        self.port = int(line[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # the server stops when its stdin closes
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class RangeServer(_ScriptServer):
    """tests/remote/range_server.py: ranges, ETag and If-Match, no nginx needed."""

    def __init__(self, root: Path) -> None:
        super().__init__(RANGE_SERVER, str(root))


def serve_directory(root: Path, work: Path):
    """nginx where it is installed, otherwise the standard-library range server."""
    if os.access(NGINX, os.X_OK):
        return Nginx(root, work)
    return RangeServer(root)


def serve_random_object(base: Path, size: int, seed: int):
    """(server, root, data): `size` random bytes (numpy.uint8, from `seed`) as root/obj.bin, served from `base`."""
    import numpy as np

    root = base / "root"
    root.mkdir()
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
    (root / "obj.bin").write_bytes(data.tobytes())
    return serve_directory(root, base / "nginx"), root, data


FAULT_PROXY = Path(__file__).resolve().parents[2] / "tests" / "remote" / "fault_proxy.py"


class FaultProxy(_ScriptServer):
    """tests/remote/fault_proxy.py in front of `upstream_port`: spoils answers on command (see its
    docstring for the modes)."""

    def __init__(self, upstream_port: int) -> None:
        super().__init__(FAULT_PROXY, str(upstream_port))

    def set(self, mode: str, count: int = -1, on: str = "GET", after: int = 0, **extra: str) -> None:
        """Sets the fault; `extra` are further query parameters (reason=, body=)."""
        import urllib.parse
        import urllib.request

        query = urllib.parse.urlencode({"mode": mode, "count": count, "on": on, "after": after, **extra})
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/__fault?{query}", timeout=10) as answer:
            assert answer.read() == b"ok\n"

    def log(self) -> list:
        """[method, range, if-match] of each request forwarded since the last set()."""
        import json
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/__log", timeout=10) as answer:
            return json.loads(answer.read())
