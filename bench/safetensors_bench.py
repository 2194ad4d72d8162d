#!/usr/bin/env python3
"""Loading a safetensors checkpoint into GPU memory: Ferry against safetensors' own loader, hot and cold,
each run in a fresh process, with the pinned copy ceiling and raw parallel O_DIRECT measured in the same run.

    PYTHONPATH=build-gpu/python python3 bench/safetensors_bench.py [--ferry-cli build-gpu/cli/ferry]
        [--file DIR/bench-model.safetensors] [--layers 10] [--hot-runs 3] [--cold-runs 2] [--out DIR]

Needs torch with CUDA and the safetensors package. The checkpoint (bf16 matrices and fp32 norms shaped like
a 7B-class model's layers: ~4.3 GiB with 10 layers) is written once with safetensors.torch.save_file and
reused while its size matches. Each timed run is a fresh `python3 bench/safetensors_bench.py --child ...`:
it imports torch and the loader, makes the CUDA context (torch.zeros(1, device="cuda")), then times from
the call to torch.cuda.synchronize() after it returned -- what a model server pays at start-up. Hot runs
follow an untimed read of the file; cold runs follow `echo 3 > /proc/sys/vm/drop_caches` (root) or
POSIX_FADV_DONTNEED (otherwise, said in the output). The ceilings come from `ferry-bench` on the same file
(copy: pinned host to device in 64 MiB chunks on 2 streams; pread: raw parallel O_DIRECT when cold), or,
without the CLI, the copy ceiling from torch.

Prints one JSON line per run, then one summary line with medians, ratios and the targets of issue 12:
hot >= 0.8 x copy ceiling and >= 7 x safetensors; cold >= 0.95 x raw O_DIRECT. About 2-3 minutes on an
H200 machine (the first time also ~20 s to write the checkpoint).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
GB = 1e9
GIB = float(1 << 30)


# --------------------------------------------------------------------------------------------- child


def child(loader: str, path: str) -> None:
    """One timed load in this fresh process; prints one JSON object."""
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    extra: Dict[str, Any] = {}
    if loader == "ferry":
        from ferry import safetensors as fst

        t0 = time.perf_counter()
        result = fst.load(path, "cuda:0", progress=False)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        tensors = result.tensors
        s = result.stats
        extra = {k: s[k] for k in ("open_seconds", "allocate_seconds", "read_seconds", "views_seconds", "requests")}
        extra["route"] = result.report.summary
        extra["notes"] = s["notes"]
    else:
        from safetensors.torch import load_file

        t0 = time.perf_counter()
        tensors = load_file(path, device="cuda:0")
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    # A fingerprint of the bits, after the clock stopped, so that the two loaders can be compared: integer
    # sums of the raw elements, exact whatever the order of summation.
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    fingerprint = int(sum(int(t.reshape(-1).view(ints[t.element_size()]).sum(dtype=torch.int64)) for t in tensors.values()))
    print(json.dumps({"loader": loader, "seconds": seconds, "bytes": nbytes, "tensors": len(tensors),
                      "fingerprint": fingerprint, **extra}))


# --------------------------------------------------------------------------------------------- parent


def layer_shapes(layers: int, hidden: int = 4096, inter: int = 11008, vocab: int = 32000) -> Dict[str, Any]:
    """A Llama-like model's tensors: name -> (shape, dtype). The defaults are a 7B model's widths."""
    import torch

    shapes: Dict[str, Any] = {"model.embed_tokens.weight": ((vocab, hidden), torch.bfloat16)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[p + f"self_attn.{name}.weight"] = ((hidden, hidden), torch.bfloat16)
        shapes[p + "mlp.gate_proj.weight"] = ((inter, hidden), torch.bfloat16)
        shapes[p + "mlp.up_proj.weight"] = ((inter, hidden), torch.bfloat16)
        shapes[p + "mlp.down_proj.weight"] = ((hidden, inter), torch.bfloat16)
        shapes[p + "input_layernorm.weight"] = ((hidden,), torch.float32)
        shapes[p + "post_attention_layernorm.weight"] = ((hidden,), torch.float32)
    shapes["model.norm.weight"] = ((hidden,), torch.float32)
    shapes["lm_head.weight"] = ((vocab, hidden), torch.bfloat16)
    return shapes


def expected_size(shapes: Dict[str, Any]) -> int:
    import torch

    total = 0
    for shape, dtype in shapes.values():
        n = 1
        for d in shape:
            n *= d
        total += n * torch.empty((), dtype=dtype).element_size()
    return total


def make_checkpoint(path: Path, layers: int) -> None:
    import torch
    from safetensors.torch import save_file

    shapes = layer_shapes(layers)
    want = expected_size(shapes)
    if path.exists() and want < path.stat().st_size < want + (16 << 20):
        return
    print(f"# writing {path} ({want / GIB:.2f} GiB of tensors) with safetensors.torch.save_file", file=sys.stderr)
    g = torch.Generator(device="cuda").manual_seed(0)
    tensors = {name: torch.randn(shape, generator=g, device="cuda").to(dtype).cpu()
               for name, (shape, dtype) in shapes.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={"format": "pt"})
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def warm(path: Path) -> None:
    with open(path, "rb", buffering=0) as f:
        while f.read(64 << 20):
            pass


def evict(path: Path) -> str:
    os.sync()
    if os.geteuid() == 0:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return "drop_caches (root)"
        except OSError as e:
            reason = f"drop_caches failed ({e}); "
    else:
        reason = "not root; "
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return reason + "POSIX_FADV_DONTNEED"


def run_child(loader: str, path: Path, env: Dict[str, str]) -> Dict[str, Any]:
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", loader, str(path)],
                         capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{loader} child failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def ferry_bench(cli: str, path: Path, size: int, env: Dict[str, str]) -> Dict[str, Any]:
    """copy ceiling and raw pread (O_DIRECT when cold) from `ferry-bench` (beside the `ferry` CLI) on the same
    file."""
    size = size // 4096 * 4096
    cmd = [str(Path(cli).with_name("ferry-bench")), str(path), "--size", str(size), "--routes", "staged", "--baselines", "copy,pread",
           "--cache", "both", "--repeats", "3", "--cold-repeats", "2", "--json", "--no-progress"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({out.returncode}): {out.stderr[-2000:]}")
    report = json.loads(out.stdout)
    found: Dict[str, Any] = {"command": " ".join(cmd)}
    for r in report["results"]:
        if r.get("status") != "ok" or r.get("median_gib_per_s") is None:
            continue
        key = f"{r['name']}_{r.get('condition') or 'hot'}"  # the copy ceiling has no cache condition
        best = found.get(key)
        if best is None or r["median_gib_per_s"] > best:
            found[key] = r["median_gib_per_s"]
    return found


def torch_copy_ceiling(size: int, to_device: bool = True) -> float:
    """GiB/s of one copy of `size` bytes between pinned host memory and the GPU (median of 3)."""
    import torch

    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst, src = (dev, host) if to_device else (host, dev)
    warmup = min(size, 256 << 20)
    dst[:warmup].copy_(src[:warmup], non_blocking=True)
    torch.cuda.synchronize()
    rates = []
    for _ in range(3):
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        rates.append(size / (time.perf_counter() - t0) / GIB)
    return statistics.median(rates)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=2, metavar=("LOADER", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--file", default=os.environ.get("FERRY_BENCH_DATA", "build-gpu/bench-data") + "/bench-model.safetensors")
    ap.add_argument("--layers", type=int, default=10, help="decoder layers (10: ~4.3 GiB)")
    ap.add_argument("--hot-runs", type=int, default=3)
    ap.add_argument("--cold-runs", type=int, default=2)
    ap.add_argument("--ferry-cli", default=None, help="the ferry CLI, for the copy and O_DIRECT ceilings "
                    "(default: build-gpu/cli/ferry or build/cli/ferry when present)")
    ap.add_argument("--out", default=None, help="also write every JSON line to DIR/safetensors-bench.jsonl")
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0

    started = time.time()
    lines: List[Dict[str, Any]] = []

    def emit(obj: Dict[str, Any]) -> None:
        lines.append(obj)
        print(json.dumps(obj), flush=True)

    import torch

    if not torch.cuda.is_available():
        print("safetensors_bench: no CUDA device visible to torch", file=sys.stderr)
        return 1
    path = Path(args.file).resolve()
    make_checkpoint(path, args.layers)
    size = path.stat().st_size
    env = dict(os.environ)
    # The children must import the same ferry wherever they run: make relative PYTHONPATH entries absolute.
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    cli = args.ferry_cli or next((c for c in ("build-gpu/cli/ferry", "build/cli/ferry") if os.access(c, os.X_OK)), None)
    emit({"kind": "environment", "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
          "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
          "gpu": torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count(), "torch": torch.__version__,
          "file": str(path), "file_bytes": size, "root": os.geteuid() == 0,
          "ferry_env": {k: v for k, v in env.items() if k.startswith("FERRY_")}})

    runs: Dict[str, List[Dict[str, Any]]] = {}
    warm(path)  # neither loader evicts it, so it stays cached for every hot run
    for i in range(args.hot_runs):
        for loader in (("ferry", "safetensors") if i % 2 == 0 else ("safetensors", "ferry")):
            r = run_child(loader, path, env)
            r.update(kind="run", cache="hot", run=i, gb_per_s=r["bytes"] / r["seconds"] / GB,
                     gib_per_s=r["bytes"] / r["seconds"] / GIB)
            runs.setdefault(f"{loader}_hot", []).append(r)
            emit(r)
    for i in range(args.cold_runs):
        for loader in (("ferry", "safetensors") if i % 2 == 0 else ("safetensors", "ferry")):
            method = evict(path)
            r = run_child(loader, path, env)
            r.update(kind="run", cache="cold", eviction=method, run=i, gb_per_s=r["bytes"] / r["seconds"] / GB,
                     gib_per_s=r["bytes"] / r["seconds"] / GIB)
            runs.setdefault(f"{loader}_cold", []).append(r)
            emit(r)

    ceilings: Dict[str, Any] = {}
    if cli:
        try:
            ceilings = ferry_bench(cli, path, size, env)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            ceilings = {"error": str(e)}
    if "copy_hot" not in ceilings:
        ceilings["copy_hot"] = torch_copy_ceiling(min(size, 4 << 30))
        ceilings["copy_source"] = "torch pinned copy (ferry-bench unavailable)"
    emit({"kind": "ceilings", "gib_per_s": ceilings})

    def median(key: str) -> Optional[float]:
        values = [r["gib_per_s"] for r in runs.get(key, [])]
        return statistics.median(values) if values else None

    med = {k: median(k) for k in ("ferry_hot", "safetensors_hot", "ferry_cold", "safetensors_cold")}
    copy = ceilings.get("copy_hot")
    direct = ceilings.get("pread_cold")

    def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
        return a / b if a is not None and b else None

    ratios = {
        "hot_vs_copy_ceiling": ratio(med["ferry_hot"], copy),
        "hot_vs_safetensors": ratio(med["ferry_hot"], med["safetensors_hot"]),
        "cold_vs_raw_o_direct": ratio(med["ferry_cold"], direct),
        "cold_vs_safetensors": ratio(med["ferry_cold"], med["safetensors_cold"]),
    }
    targets = {
        "hot >= 0.8 x copy ceiling": (ratios["hot_vs_copy_ceiling"] or 0) >= 0.8,
        "hot >= 7 x safetensors": (ratios["hot_vs_safetensors"] or 0) >= 7,
        "cold >= 0.95 x raw O_DIRECT": (ratios["cold_vs_raw_o_direct"] or 0) >= 0.95,
    }
    prints = {r["fingerprint"] for rs in runs.values() for r in rs}
    emit({"kind": "summary", "median_gib_per_s": med,
          "median_gb_per_s": {k: v * GIB / GB if v else None for k, v in med.items()},
          "ceilings_gib_per_s": {"copy": copy, "raw_o_direct_cold": direct}, "ratios": ratios, "targets": targets,
          "same_values_both_loaders": len(prints) == 1, "total_seconds": time.time() - started})
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "safetensors-bench.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
