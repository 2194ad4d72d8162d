#!/usr/bin/python3
"""Remote reads on loopback: Ferry's File over a URL (ferry.open(url)) against curl with the same
parallelism, and ferry.dask against plain dask + NumPy reads of the same shards.

    PYTHONPATH=build/python /usr/bin/python3 bench/remote_bench.py [--size-mib 1024] [--connections 4]
        [--shards 8] [--repeats 3] [--dir /dev/shm/ferry-remote-bench] [--json out.jsonl]

nginx (2 workers, sendfile) serves a file of --size-mib from --dir (default /dev/shm, so the server reads
from memory); Ferry reads with remote_connections=N and one range request per task (task_size: the default
4 MiB, and size/N); the clients write into memory too: Ferry into a NumPy buffer, curl into /dev/null (which
costs curl less than a copy into memory, so the comparison favours curl). Each figure is the median of
--repeats runs after one warm-up. The curl baselines: N curl processes each fetching 1/N of the file with
--range, and one `curl --parallel` with N ranged transfers (where curl supports it). The Dask part splits
the file's bytes into --shards files and reads them on a LocalCluster of 2 worker processes.
Prints one JSON line per measurement and a table; warns when Ferry's module is a debug build.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(root: Path, work: Path, workers: int = 2):
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    w = str(work)
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers could not read 0700 directories as nobody
    (work / "nginx.conf").write_text(
        user + f"daemon off;\nmaster_process on;\nworker_processes {workers};\npid {w}/nginx.pid;\nerror_log {w}/error.log;\n"
        "events { worker_connections 1024; }\n"
        f"http {{\n access_log off;\n client_body_temp_path {w}/cb;\n proxy_temp_path {w}/px;\n"
        f" fastcgi_temp_path {w}/fc;\n uwsgi_temp_path {w}/uw;\n scgi_temp_path {w}/sc;\n"
        " default_type application/octet-stream;\n sendfile on;\n tcp_nopush on;\n keepalive_requests 1000000;\n"
        f" server {{ listen 127.0.0.1:{port}; root {root}; }}\n}}\n"
    )
    proc = subprocess.Popen(["/usr/sbin/nginx", "-p", w, "-c", f"{w}/nginx.conf", "-e", f"{w}/error.log"],
                            stdin=subprocess.DEVNULL)
    for _ in range(250):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.02)
    proc.terminate()
    raise RuntimeError("nginx did not start")


def timed(fn, repeats: int) -> float:
    fn()  # warm-up: page cache, connections, imports
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def curl_processes(url: str, size: int, n: int) -> None:
    step = (size + n - 1) // n
    procs = []
    for i in range(n):
        a, b = i * step, min(size, (i + 1) * step) - 1
        procs.append(subprocess.Popen(["curl", "-s", "-f", "-o", "/dev/null", "-r", f"{a}-{b}", url]))
    if any(p.wait() != 0 for p in procs):
        raise RuntimeError("curl failed")


def curl_parallel(url: str, size: int, n: int) -> None:
    step = (size + n - 1) // n
    args = ["curl", "-s", "-f", "--parallel", "--parallel-max", str(n)]
    for i in range(n):
        a, b = i * step, min(size, (i + 1) * step) - 1
        args += ["-r", f"{a}-{b}", "-o", "/dev/null", url]
    subprocess.run(args, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default="/dev/shm/ferry-remote-bench")
    ap.add_argument("--json", default="")
    ap.add_argument("--skip-dask", action="store_true")
    args = ap.parse_args()

    import numpy as np

    import ferry

    base = Path(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    root = base / "root"
    root.mkdir(parents=True)
    size = args.size_mib << 20
    big = root / "big.bin"
    with open(big, "wb") as f:
        chunk = np.random.default_rng(1).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
        left = size
        while left:
            f.write(chunk[: min(left, len(chunk))])
            left -= min(left, len(chunk))
    proc, port = start_nginx(root, base / "nginx")
    url = f"http://127.0.0.1:{port}/big.bin"
    rows = []
    env = {
        "machine": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(),
        "python": sys.version.split()[0], "ferry": getattr(ferry, "__version__", "?"),
        "curl": subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split("\n")[0],
        "size_bytes": size, "connections": args.connections, "repeats": args.repeats, "dir": str(base),
    }

    def record(name: str, seconds: float, nbytes: int, **extra) -> None:
        row = {"bench": name, "seconds": seconds, "gib_per_s": nbytes / seconds / 2**30, **extra, "env": env}
        rows.append(row)
        print(json.dumps(row), flush=True)

    try:
        n = args.connections
        buf = np.empty(size, dtype=np.uint8)
        part = max(1 << 20, (size + n - 1) // n)
        for label, task_size in (("ferry File tasks=4MiB (default)", 4 << 20), ("ferry File tasks=size/N", part)):
            f = ferry.open(url, remote_connections=n, task_size=task_size)
            secs = timed(lambda: f.pread(buf).result(), args.repeats)
            note = next(x for x in f.report()["notes"] if "HTTP requests" in x)
            record(label, secs, size, object_note=note)
            f.close()
        assert buf[:1 << 20].tobytes() == big.read_bytes()[: 1 << 20]
        record(f"curl x{n} processes --range", timed(lambda: curl_processes(url, size, n), args.repeats), size)
        try:
            record(f"curl --parallel {n} ranges", timed(lambda: curl_parallel(url, size, n), args.repeats), size)
        except subprocess.CalledProcessError:
            print("curl --parallel not supported here; skipped", file=sys.stderr)

        if not args.skip_dask:
            import dask
            import distributed

            import ferry.dask

            shard_bytes = size // args.shards
            paths = []
            with open(big, "rb") as src:
                for i in range(args.shards):
                    p = root / f"shard-{i:03d}.bin"
                    p.write_bytes(src.read(shard_bytes))
                    paths.append(str(p))
            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                               dashboard_address=None, silence_logs=40)
            client = distributed.Client(cluster)
            try:
                shape = (shard_bytes,)

                def plain() -> None:
                    import dask.array as da

                    parts = [da.from_delayed(dask.delayed(np.fromfile)(p, dtype=np.uint8), shape=shape, dtype=np.uint8)
                             for p in paths]
                    da.concatenate(parts).sum().compute()

                def with_ferry() -> None:
                    ferry.dask.read_array(paths, shape, np.uint8, device="cpu").sum().compute()

                def ferry_remote() -> None:
                    urls = [f"http://127.0.0.1:{port}/{Path(p).name}" for p in paths]
                    ferry.dask.read_array(urls, shape, np.uint8, device="cpu",
                                          settings={"remote_connections": 2}).sum().compute()

                record(f"dask+numpy.fromfile {args.shards} shards", timed(plain, args.repeats), size)
                record(f"ferry.dask local {args.shards} shards", timed(with_ferry, args.repeats), size)
                record(f"ferry.dask http {args.shards} shards", timed(ferry_remote, args.repeats), size)
            finally:
                client.close()
                cluster.close()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(base, ignore_errors=True)

    print(f"\n{'measurement':44} {'GiB/s':>8} {'seconds':>8}")
    for r in rows:
        print(f"{r['bench']:44} {r['gib_per_s']:8.2f} {r['seconds']:8.3f}")
    if args.json:
        with open(args.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
