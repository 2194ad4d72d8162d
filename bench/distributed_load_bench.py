#!/usr/bin/env python3
"""One checkpoint onto every GPU of a node (issue 25): ferry.distributed against each rank loading it itself.

Run with one process per GPU (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE):

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=build-gpu/python \\
      torchrun --standalone --nproc_per_node 8 bench/distributed_load_bench.py \\
      [--dir build-gpu/bench-data/distributed-ckpt] [--gib 32] [--hot-runs 3] [--cold-runs 1]
      [--part-bytes 64MiB] [--loaders distributed,each,safetensors] [--cold-loaders distributed,raw]
      [--out bench/results/DATE-h200x8-distributed]

The checkpoint (bf16 matrices and fp32 norms shaped like a 70B-class model's layers, as many layers as make
``--gib``, in 5 GB shards with an index, as save_pretrained lays them out) is written once by rank 0 with
ferry.safetensors.save_sharded and reused while its size matches. Every timed run starts with a barrier and
ends with torch.cuda.synchronize() on every rank; its time is the slowest rank's (gathered from every rank).

Loaders: ``distributed`` (ferry.safetensors.load with process_group: each byte read by one rank, exchanged
over NCCL); ``each`` (every rank calls ferry.safetensors.load itself: the checkpoint read N times);
``safetensors`` (every rank calls safetensors.torch.load_file, when the package is installed); ``raw``
(cold only: every rank reads a disjoint 1/N of the files' bytes with O_DIRECT preads on 16 threads into
host memory, nothing else: the storage's raw parallel read rate). Hot runs follow an untimed read of every
shard; cold runs follow `echo 3 > /proc/sys/vm/drop_caches` (root) or POSIX_FADV_DONTNEED on every shard.

Checks, untimed, after every distributed run: every tensor is byte-equal on every rank (rank 0 broadcasts
each tensor and every rank compares), and equal on rank 0 to a single-process load of the files (integer
fingerprints of every tensor); each byte was read once (the group's bytes_read add up to the checkpoint).

Prints one JSON line per run (rank 0), then a summary: medians, GB/s of checkpoint bytes per second
("aggregate": the checkpoint's bytes over the time until every GPU holds it; "delivered": world_size x
that), and issue 25's targets: on 8 GPUs >= 150 GB/s hot and >= 0.9 x the raw cold rate.
"""

from __future__ import annotations

import argparse
import datetime
import json
import mmap
import os
import platform
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

GB = 1e9
GIB = float(1 << 30)

for _name, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_name, _value)  # NVLink multicast stays off on shared hosts

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from safetensors_bench import evict, expected_size, layer_shapes  # noqa: E402  (the same kind of checkpoint)

# ------------------------------------------------------------------------------------------ checkpoint


def model_shapes(gib: float, hidden: int) -> Dict[str, Tuple[Tuple[int, ...], Any]]:
    """safetensors_bench's Llama-like tensors (hidden 8192: 70B-class layers of 1.95 GB), as many layers as
    make ``gib``."""
    inter, vocab = hidden * 7 // 2, 128256 * hidden // 8192  # 8192: 28672, 128256
    per_layer = 2 * (4 * hidden * hidden + 3 * hidden * inter) + 4 * 2 * hidden
    edges = 2 * 2 * vocab * hidden
    return layer_shapes(max(1, round((gib * GIB - edges) / per_layer)), hidden, inter, vocab)


def shard_files(directory: Path) -> List[Path]:
    return sorted(directory.glob("*.safetensors"))


def make_checkpoint(directory: Path, gib: float, hidden: int, device: str) -> None:
    """Writes the checkpoint unless ``directory`` already holds one of this size (rank 0 only)."""
    from ferry.safetensors import save_sharded

    shapes = model_shapes(gib, hidden)
    want = expected_size(shapes)
    have = sum(f.stat().st_size for f in shard_files(directory)) if directory.exists() else 0
    if (directory / "model.safetensors.index.json").exists() and want < have < want + (64 << 20):
        return
    print(f"# writing {directory} ({want / GIB:.1f} GiB of tensors, {len(shapes)} tensors)", file=sys.stderr, flush=True)
    g = torch.Generator(device=torch.device(device).type).manual_seed(25)
    tensors = {n: torch.randn(s, generator=g, device=device, dtype=torch.float32).to(d) for n, (s, d) in shapes.items()}
    directory.mkdir(parents=True, exist_ok=True)
    save_sharded(tensors, directory, max_shard_size="5GB", metadata={"format": "pt"}, remove_stale=True)
    del tensors
    free_cache()


def free_cache() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def warm(files: List[Path]) -> None:
    def read(path: Path) -> None:
        with open(path, "rb", buffering=0) as f:
            while f.read(64 << 20):
                pass

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(read, files))


def evict_all(files: List[Path]) -> str:
    return "; ".join(sorted({evict(f) for f in files}))


# --------------------------------------------------------------------------------------------- loaders


def fingerprint(tensors: Dict[str, Any]) -> Dict[str, int]:
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return {n: int(t.reshape(-1).view(ints[t.element_size()]).sum(dtype=torch.int64)) for n, t in tensors.items()}


def raw_read(files: List[Path], rank: int, world: int, threads: int = 16, piece: int = 16 << 20) -> int:
    """This rank's 1/world of every file's bytes, with O_DIRECT preads into page-aligned host memory."""
    jobs = []
    for f in files:
        size = f.stat().st_size // 4096 * 4096
        share = (-(-size // world) + 4095) // 4096 * 4096  # whole pages; the last page's tail is left out
        lo, hi = min(size, rank * share), min(size, (rank + 1) * share)
        jobs += [(f, at, min(piece, hi - at)) for at in range(lo, hi, piece)]
    done = [0]
    lock = threading.Lock()
    local = threading.local()

    def read(job: Tuple[Path, int, int]) -> None:
        path, at, n = job
        if not hasattr(local, "buf"):
            local.buf = mmap.mmap(-1, piece)
            local.fds = {}
        fd = local.fds.get(path)
        if fd is None:
            fd = local.fds[path] = os.open(path, os.O_RDONLY | os.O_DIRECT)
        got = os.preadv(fd, [memoryview(local.buf)[:n]], at)
        with lock:
            done[0] += got

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(read, jobs))
    return done[0]


def load(loader: str, directory: Path, device: str, part_bytes: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    import ferry.safetensors

    if loader == "distributed":
        result = ferry.safetensors.load(directory, device, process_group=dist.group.WORLD, part_bytes=part_bytes,
                                        progress=False)
        return result.tensors, result.stats
    if loader == "each":
        result = ferry.safetensors.load(directory, device, progress=False)
        return result.tensors, result.stats
    if loader == "safetensors":
        from safetensors.torch import load_file

        tensors: Dict[str, Any] = {}
        for f in shard_files(directory):
            tensors.update(load_file(str(f), device=device))
        return tensors, {}
    raise ValueError(f"unknown loader {loader!r}")


# ------------------------------------------------------------------------------------------------ runs


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.local = int(os.environ.get("LOCAL_RANK", self.rank))
        self.device = "cpu" if args.cpu else f"cuda:{self.local}"
        self.dir = Path(args.dir).resolve()
        self.files = shard_files(self.dir)
        self.bytes = 0
        self.lines: List[Dict[str, Any]] = []
        self.reference: Dict[str, int] = {}  # rank 0: fingerprints of a single-process load of the files
        self.runs: Dict[str, List[Dict[str, Any]]] = {}

    def emit(self, obj: Dict[str, Any]) -> None:
        if self.rank == 0:
            self.lines.append(obj)
            print(json.dumps(obj), flush=True)

    def slowest(self, seconds: float) -> Tuple[float, List[float]]:
        every = [torch.zeros(1, dtype=torch.float64, device=self.device) for _ in range(self.world)]
        dist.all_gather(every, torch.tensor([seconds], dtype=torch.float64, device=self.device))
        per_rank = [float(t.item()) for t in every]
        return max(per_rank), per_rank

    def timed(self, run: Callable[[], Any]) -> Tuple[Any, float, List[float]]:
        dist.barrier()
        synchronize()
        t0 = time.perf_counter()
        out = run()
        synchronize()
        seconds, per_rank = self.slowest(time.perf_counter() - t0)
        return out, seconds, per_rank

    def prepare(self, cache: str) -> str:
        how = "warm read of every shard"
        if self.rank == 0:
            how = evict_all(self.files) if cache == "cold" else (warm(self.files) or how)
        dist.barrier()
        return how

    def record(self, loader: str, cache: str, i: int, seconds: float, per_rank: List[float], how: str,
               extra: Dict[str, Any]) -> None:
        r = {"kind": "run", "loader": loader, "cache": cache, "run": i, "seconds": seconds, "per_rank_seconds": per_rank,
             "bytes": self.bytes, "aggregate_gb_per_s": self.bytes / seconds / GB,
             "delivered_gb_per_s": self.world * self.bytes / seconds / GB, "cache_preparation": how, **extra}
        self.runs.setdefault(f"{loader}_{cache}", []).append(r)
        self.emit(r)

    def take_reference(self) -> None:
        """Rank 0 loads the files by itself once, untimed, to compare the group's loads with."""
        if self.rank == 0:
            tensors, _ = load("each", self.dir, self.device, 0)
            self.reference = fingerprint(tensors)
            del tensors
            free_cache()
        dist.barrier()

    def check(self, tensors: Dict[str, Any], stats: Dict[str, Any]) -> Dict[str, Any]:
        """Every tensor equal on every rank, and on rank 0 to a single-process load; each byte read once."""
        unequal = []
        for name in sorted(tensors):
            t = tensors[name].reshape(-1).view(torch.uint8)
            ref = t.clone()
            dist.broadcast(ref, 0)
            if not torch.equal(ref, t):
                unequal.append(name)
            del ref
        flags = torch.tensor([len(unequal)], device=self.device)
        dist.all_reduce(flags)
        same_as_file = fingerprint(tensors) == self.reference if self.rank == 0 else None
        return {"ranks_with_unequal_tensors": int(flags.item()), "unequal_here": unequal[:5],
                "equal_to_single_load_on_rank0": same_as_file, "read_once": stats["group_bytes_read"] == self.bytes,
                "bytes_read_per_rank": [r["bytes_read"] for r in stats["ranks"]],
                "routes_rank0": stats["ranks"][0]["routes"]}

    def one(self, loader: str, cache: str, i: int) -> None:
        how = self.prepare(cache)
        if loader == "raw":
            _, seconds, per_rank = self.timed(lambda: raw_read(self.files, self.rank, self.world))
            self.record(loader, cache, i, seconds, per_rank, how, {})
            return
        (tensors, stats), seconds, per_rank = self.timed(
            lambda: load(loader, self.dir, self.device, self.args.part_bytes))
        extra: Dict[str, Any] = {}
        if stats:
            extra = {k: stats[k] for k in ("bytes_read", "requests", "read_seconds", "open_seconds") if k in stats}
            for k in ("bytes_received", "rounds", "exchange_wait_seconds", "agree_seconds"):
                if k in stats:
                    extra[k] = stats[k]
        if loader == "distributed":
            extra["check"] = self.check(tensors, stats)
        del tensors, stats
        free_cache()
        self.record(loader, cache, i, seconds, per_rank, how, extra)

    def summary(self) -> Dict[str, Any]:
        med = {k: statistics.median(r["aggregate_gb_per_s"] for r in v) for k, v in self.runs.items()}
        out: Dict[str, Any] = {"kind": "summary", "world_size": self.world, "bytes": self.bytes,
                               "median_aggregate_gb_per_s": med}
        if "distributed_hot" in med:
            out["hot_target_gb_per_s"] = 150 * self.world / 8
            out["hot_meets_target"] = med["distributed_hot"] >= out["hot_target_gb_per_s"]
            if "each_hot" in med:
                out["hot_vs_each"] = med["distributed_hot"] / med["each_hot"]
        if "distributed_cold" in med and "raw_cold" in med:
            out["cold_vs_raw"] = med["distributed_cold"] / med["raw_cold"]
            out["cold_meets_target"] = out["cold_vs_raw"] >= 0.9
        checks = [r["check"] for v in self.runs.values() for r in v if "check" in r]
        out["all_checks_passed"] = bool(checks) and all(
            c["ranks_with_unequal_tensors"] == 0 and c["equal_to_single_load_on_rank0"] and c["read_once"] for c in checks)
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.environ.get("FERRY_BENCH_DATA", "build-gpu/bench-data") + "/distributed-ckpt")
    ap.add_argument("--gib", type=float, default=32.0, help="checkpoint size (GiB of tensors)")
    ap.add_argument("--hidden", type=int, default=8192, help="the model's width (shapes of its matrices)")
    ap.add_argument("--hot-runs", type=int, default=3)
    ap.add_argument("--cold-runs", type=int, default=1)
    ap.add_argument("--part-bytes", default="64MiB", help="bytes each rank reads per round")
    ap.add_argument("--loaders", default="distributed,each", help="hot: distributed, each, safetensors")
    ap.add_argument("--cold-loaders", default="distributed,raw", help="cold: distributed, each, safetensors, raw")
    ap.add_argument("--out", default=None, help="also write the JSON lines to DIR/distributed-load-bench.jsonl")
    ap.add_argument("--cpu", action="store_true", help="gloo and host memory (a smoke test of this script)")
    args = ap.parse_args()
    import ferry

    args.part_bytes = ferry.parse_size(args.part_bytes)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not args.cpu:
        torch.cuda.set_device(local)
    # Rank 0 may write the checkpoint first: the others wait at a barrier meanwhile.
    dist.init_process_group("gloo" if args.cpu else "nccl", timeout=datetime.timedelta(minutes=30))
    bench = Bench(args)
    if bench.rank == 0:
        make_checkpoint(bench.dir, args.gib, args.hidden, bench.device)
    dist.barrier()
    bench.files = shard_files(bench.dir)
    import ferry.safetensors

    with ferry.safetensors.safe_open(bench.dir) as f:
        bench.bytes = sum(ferry.safetensors.DTYPE_SIZES[f.get_dtype(k)] * torch.Size(f.get_shape(k)).numel()
                          for k in f.keys())
    nccl = torch.cuda.nccl.version() if not args.cpu else None
    bench.emit({"kind": "environment", "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
                "gpu": None if args.cpu else torch.cuda.get_device_name(local), "world_size": bench.world,
                "torch": torch.__version__, "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
                "backend": dist.get_backend(), "dir": str(bench.dir), "files": len(bench.files),
                "bytes": bench.bytes, "part_bytes": args.part_bytes, "root": os.geteuid() == 0,
                "env": {k: v for k, v in os.environ.items() if k.startswith(("FERRY_", "NCCL_"))}})
    loaders = [x for x in args.loaders.split(",") if x]
    if "safetensors" in loaders:
        try:
            import safetensors.torch  # noqa: F401
        except ImportError:
            loaders.remove("safetensors")
            bench.emit({"kind": "note", "text": "the safetensors package is not installed: its loader is left out"})
    bench.take_reference()
    for i in range(args.hot_runs):
        for loader in (loaders if i % 2 == 0 else loaders[::-1]):
            bench.one(loader, "hot", i)
    for i in range(args.cold_runs):
        for loader in [x for x in args.cold_loaders.split(",") if x]:
            bench.one(loader, "cold", i)
    summary = bench.summary()
    bench.emit(summary)
    if args.out and bench.rank == 0:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        with open(Path(args.out) / "distributed-load-bench.jsonl", "w") as f:
            for line in bench.lines:
                f.write(json.dumps(line) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0 if summary["all_checks_passed"] else 3


if __name__ == "__main__":
    sys.exit(main())
