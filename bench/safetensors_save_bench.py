#!/usr/bin/env python3
"""Saving checkpoints from GPU memory, and loading whole models, against the reference and the hardware, in one
run (issue 22):

    PYTHONPATH=build-gpu/python python3 bench/safetensors_save_bench.py [--dir DIR] [--layers 10] [--runs 3]
        [--model-layers 7] [--model-runs 3] [--skip-saves] [--skip-models] [--out DIR]

Saves (in this process, CUDA initialised, 4+ GB of bf16 CUDA tensors shaped like a 7B-class model's layers,
the same as bench/safetensors_bench.py's; runs interleaved, medians):
- safetensors.torch.save_file (to the page cache), and the same followed by an fsync;
- Ferry save_file(durable=False) (O_DIRECT where aligned, no syncs), the same with direct_io="off" (the page
  cache), and save_file() (durable: fdatasync, rename, directory fsync);
- the disk's raw O_DIRECT write rate: 16 threads writing 4 MiB blocks from page-aligned memory into a new
  file in the same directory, fdatasync included; best of a growing file and one sized first;
- background saves: the time from the call until handle.snapshot() returned, against bytes / the
  device-to-host copy ceiling (one cudaMemcpy of the same bytes into pinned memory), after one untimed
  background save that pins the staging memory (its snapshot time is shown apart).
Models (each timed step in a fresh process, imports and CUDA's start done first): a Llama-shaped
transformers model of --model-layers layers (7: about 3.4 GB of bf16, two shards) saved once with
save_pretrained; then, alternating, (a) construction with ferry.torch.meta_parameters + from_config, then
ferry.torch.load_into_module, timed apart, and (b) from_pretrained(device_map="cuda:0"); the logits of both
must be equal.

Needs torch with CUDA, and the safetensors package and transformers for the comparisons (each part is
skipped, saying so, without them). Prints one JSON line per measurement and a summary with the goals:
page cache >= 3 x safetensors; durable >= 0.9 x raw O_DIRECT; snapshot <= 1.2 x bytes / D2H ceiling; model
load <= 1.2 x bytes / H2D ceiling and construction + load < from_pretrained. `--device cpu` with small sizes
is a smoke run of the script itself (no ceilings, no goals). About 4-6 minutes on the H200 machine.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from safetensors_bench import layer_shapes, torch_copy_ceiling  # noqa: E402  (the same checkpoint shapes)

GB = 1e9
GIB = float(1 << 30)


def have(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


# ------------------------------------------------------------------------------------------- ceilings


def raw_direct_write(path: Path, nbytes: int, presize: bool, threads: int = 16, block: int = 4 << 20) -> float:
    """GB/s of parallel O_DIRECT pwrites of `nbytes` into a new file, fdatasync included."""
    nbytes = nbytes // block * block
    buffers = [mmap.mmap(-1, block) for _ in range(threads)]
    for b in buffers:
        b.write(os.urandom(4096) * (block // 4096))
    path.unlink(missing_ok=True)
    os.sync()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o644)
    try:
        t0 = time.perf_counter()
        if presize:
            os.ftruncate(fd, nbytes)

        def worker(k: int) -> None:
            view = memoryview(buffers[k])
            for off in range(k * block, nbytes, threads * block):
                done = 0
                while done < block:
                    done += os.pwrite(fd, view[done:], off + done)

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(worker, range(threads)))
        os.fdatasync(fd)
        return nbytes / (time.perf_counter() - t0) / GB
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------- saves


def make_tensors(layers: int, device: str, scale: float) -> Dict[str, Any]:
    import torch

    g = torch.Generator(device="cpu").manual_seed(0)
    out = {}
    for name, (shape, dtype) in layer_shapes(layers).items():
        shape = tuple(max(1, int(d * scale)) for d in shape)
        out[name] = torch.randn(shape, generator=g).to(dtype).to(device)
    return out


def timed(fn: Callable[[], Any]) -> float:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(64 << 20):
            h.update(chunk)
    return h.hexdigest()


def fresh(path: Path) -> None:
    """No earlier file, and no dirty pages of earlier runs still being written back."""
    path.unlink(missing_ok=True)
    os.sync()


def bench_saves(args: argparse.Namespace, emit: Callable[[Dict[str, Any]], None], data: Path) -> Dict[str, Any]:
    import torch
    import ferry.safetensors as fst

    tensors = make_tensors(args.layers, args.device, args.scale)
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    target = data / "save-bench.safetensors"
    ref = None
    if have("safetensors.torch"):
        import safetensors.torch as ref
    else:
        emit({"kind": "note", "text": "the safetensors package is not installed: no reference saves"})

    def reference(fsync: bool) -> None:
        ref.save_file(tensors, str(target), metadata={"format": "pt"})
        if fsync:
            fd = os.open(target, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)

    last: Dict[str, Any] = {}

    def ferry(durable: bool, **settings: Any) -> None:
        last["result"] = fst.save_file(tensors, target, {"format": "pt"}, durable=durable, **settings)

    # ferry_scratch: durable=False as it is now (O_DIRECT where aligned, no syncs); ferry_page_cache: the same
    # through the page cache (direct_io="off"), as durable=False wrote before issue 48.
    kinds: Dict[str, Callable[[], None]] = {
        "ferry_scratch": lambda: ferry(False),
        "ferry_page_cache": lambda: ferry(False, direct_io="off"),
        "ferry_durable": lambda: ferry(True),
    }
    if ref is not None:
        kinds["safetensors_page_cache"] = lambda: reference(False)
        kinds["safetensors_fsync"] = lambda: reference(True)
    runs: Dict[str, List[float]] = {k: [] for k in kinds}
    for i in range(args.runs):
        for kind in (list(kinds) if i % 2 == 0 else list(reversed(kinds))):
            fresh(target)
            seconds = timed(kinds[kind])
            runs[kind].append(nbytes / seconds / GB)
            line = {"kind": "save", "what": kind, "run": i, "seconds": seconds, "bytes": nbytes,
                    "gb_per_s": nbytes / seconds / GB}
            if kind.startswith("ferry"):
                s = last["result"].stats
                line.update({k: s[k] for k in ("sync_seconds", "commit_seconds", "requests", "device_bytes",
                                               "staging_bytes")})
                line["notes"] = last["result"].notes
                line["io"] = last["result"].report["io"]
            emit(line)
    if ref is not None:
        ferry(False)
        ours = sha256(target)
        reference(False)
        emit({"kind": "check", "same_bytes_as_safetensors": ours == sha256(target), "sha256": ours})

    raw = []
    for i in range(args.runs):
        for presize in (False, True):
            r = raw_direct_write(data / "raw-direct.bin", nbytes, presize)
            raw.append(r)
            emit({"kind": "raw_o_direct", "run": i, "presized": presize, "gb_per_s": r})

    background: Dict[str, Any] = {}
    if args.device != "cpu":
        d2h = torch_copy_ceiling(nbytes, to_device=False) * GIB / GB
        emit({"kind": "ceiling", "what": "d2h_copy", "gb_per_s": d2h})
        snaps = []
        for i in range(args.runs + 1):
            fresh(target)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            handle = fst.save_file(tensors, target, {"format": "pt"}, background=True)
            handle.snapshot()
            snapshot = time.perf_counter() - t0
            result = handle.result()
            total = time.perf_counter() - t0
            emit({"kind": "background", "run": i, "first": i == 0, "snapshot_seconds": snapshot,
                  "result_seconds": total, "bytes": nbytes, "ceiling_seconds": nbytes / (d2h * GB),
                  "snapshot_vs_ceiling": snapshot / (nbytes / (d2h * GB)),
                  "snapshot_wait_seconds": result.stats["snapshot_wait_seconds"],
                  "staging_bytes": result.stats["staging_bytes"], "notes": result.notes})
            if i > 0:
                snaps.append(snapshot)
        background = {"d2h_gb_per_s": d2h, "snapshot_seconds": statistics.median(snaps),
                      "ceiling_seconds": nbytes / (d2h * GB)}
    target.unlink(missing_ok=True)
    del tensors
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    med = {k: statistics.median(v) for k, v in runs.items()}
    return {"bytes": nbytes, "median_gb_per_s": med, "raw_o_direct_gb_per_s": max(raw), "background": background}


# ------------------------------------------------------------------------------------------- models


def model_config(layers: int, hidden: int):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=32000, hidden_size=hidden, intermediate_size=hidden * 11008 // 4096,
                       num_hidden_layers=layers, num_attention_heads=hidden // 128, num_key_value_heads=hidden // 128,
                       tie_word_embeddings=False, torch_dtype="bfloat16")


def model_child(mode: str, directory: str, out: str, device: str) -> None:
    """One fresh process: imports and CUDA first, then the timed steps; logits saved to `out`."""
    import torch
    import transformers
    import transformers.models.llama.modeling_llama  # noqa: F401  (imports done before the clock starts)
    import ferry.torch as ft

    if device != "cpu":
        torch.zeros(1, device=device)
        torch.cuda.synchronize()
    config = transformers.AutoConfig.from_pretrained(directory)
    line: Dict[str, Any] = {"kind": "model", "mode": mode}
    t0 = time.perf_counter()
    if mode == "ferry":
        with ft.meta_parameters(buffers_device=device):
            model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
        t1 = time.perf_counter()
        result = ft.load_into_module(model, directory, device=device, progress=False)
        if device != "cpu":
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        line.update(construct_seconds=t1 - t0, load_seconds=t2 - t1, seconds=t2 - t0,
                    bytes=result.stats["bytes_read"], missing=result.missing_keys, unexpected=result.unexpected_keys,
                    route=result.report.summary if result.report is not None else None,
                    load_stats={k: v for k, v in result.stats.items() if k != "report"},  # where the load's time went
                    setup_costs=getattr(result.report, "setup_costs", None))
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(directory, device_map=device,
                                                                  torch_dtype=torch.bfloat16)
        if device != "cpu":
            torch.cuda.synchronize()
        line.update(seconds=time.perf_counter() - t0)
    ids = torch.tensor([[1, 450, 4996, 17354, 1701, 29916, 432, 17204]], device=device)
    with torch.no_grad():
        logits = model(ids).logits.float().cpu()
    torch.save(logits, out)
    print(json.dumps(line, default=str))


def bench_models(args: argparse.Namespace, emit: Callable[[Dict[str, Any]], None], data: Path,
                 env: Dict[str, str]) -> Dict[str, Any]:
    import torch

    if not have("transformers"):
        emit({"kind": "note", "text": "transformers is not installed: no model loads"})
        return {}
    import transformers

    directory = data / f"llama-{args.model_layers}x{args.model_hidden}"
    marker = directory / "config.json"
    if not marker.exists():
        print(f"# writing {directory} with save_pretrained", file=sys.stderr)
        config = model_config(args.model_layers, args.model_hidden)
        with torch.device(args.device):
            model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
        shutil.rmtree(directory, ignore_errors=True)
        model.save_pretrained(directory, safe_serialization=True, max_shard_size="2GB")
        del model
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    nbytes = sum(p.stat().st_size for p in directory.glob("*.safetensors"))
    h2d = torch_copy_ceiling(min(nbytes, 4 << 30)) * GIB / GB if args.device != "cpu" else None
    emit({"kind": "ceiling", "what": "h2d_copy", "gb_per_s": h2d, "checkpoint": str(directory), "bytes": nbytes})
    # Hot: the files stay in the page cache for every run.
    for p in directory.glob("*.safetensors"):
        with open(p, "rb", buffering=0) as f:
            while f.read(64 << 20):
                pass
    runs: Dict[str, List[Dict[str, Any]]] = {"ferry": [], "from_pretrained": []}
    logits: Dict[str, Any] = {}
    for i in range(args.model_runs):
        for mode in (("ferry", "from_pretrained") if i % 2 == 0 else ("from_pretrained", "ferry")):
            out = data / f"logits-{mode}.pt"
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--model-child", mode,
                                   str(directory), str(out), args.device], capture_output=True, text=True, env=env,
                                  timeout=900)
            if proc.returncode != 0:
                raise RuntimeError(f"{mode} child failed ({proc.returncode}): {proc.stderr[-3000:]}")
            line = json.loads(proc.stdout.strip().splitlines()[-1])
            line["run"] = i
            runs[mode].append(line)
            emit(line)
            logits[mode] = torch.load(out)
    same = torch.equal(logits["ferry"], logits["from_pretrained"])
    emit({"kind": "check", "same_logits": same,
          "max_abs_difference": float((logits["ferry"] - logits["from_pretrained"]).abs().max())})

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[mode])

    return {"bytes": nbytes, "h2d_gb_per_s": h2d, "construct_seconds": med("ferry", "construct_seconds"),
            "load_seconds": med("ferry", "load_seconds"), "construct_and_load_seconds": med("ferry", "seconds"),
            "from_pretrained_seconds": med("from_pretrained", "seconds"), "same_logits": same}


# ------------------------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-child", nargs=4, metavar=("MODE", "DIR", "OUT", "DEVICE"), help=argparse.SUPPRESS)
    ap.add_argument("--dir", default=os.environ.get("FERRY_BENCH_DATA", "build-gpu/bench-data"),
                    help="where the files are written (a disk file system: tmpfs refuses O_DIRECT)")
    ap.add_argument("--layers", type=int, default=10, help="decoder layers of the saved tensors (10: ~4.3 GB)")
    ap.add_argument("--scale", type=float, default=1.0, help="scales every dimension (smoke runs)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--model-layers", type=int, default=7, help="layers of the transformers model (7: ~3.4 GB)")
    ap.add_argument("--model-hidden", type=int, default=4096)
    ap.add_argument("--model-runs", type=int, default=3)
    ap.add_argument("--skip-models", action="store_true")
    ap.add_argument("--skip-saves", action="store_true")
    ap.add_argument("--device", default="cuda:0", help="cuda:0, or cpu for a smoke run of the script")
    ap.add_argument("--out", default=None, help="also write every JSON line to DIR/safetensors-save-bench.jsonl")
    args = ap.parse_args()
    if args.model_child:
        model_child(*args.model_child)
        return 0

    import torch
    import ferry

    if args.device != "cpu" and not torch.cuda.is_available():
        print("safetensors_save_bench: no CUDA device visible to torch (--device cpu for a smoke run)", file=sys.stderr)
        return 1
    started = time.time()
    lines: List[Dict[str, Any]] = []

    def emit(obj: Dict[str, Any]) -> None:
        lines.append(obj)
        print(json.dumps(obj, default=str), flush=True)

    data = Path(args.dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if env.get("PYTHONPATH"):  # the children import the same ferry
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    fs = subprocess.run(["df", "-T", str(data)], capture_output=True, text=True).stdout.splitlines()[-1:]
    emit({"kind": "environment", "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
          "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
          "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__,
          "ferry": ferry.__version__ if hasattr(ferry, "__version__") else None,
          "safetensors": __import__("safetensors").__version__ if have("safetensors") else None,
          "transformers": __import__("transformers").__version__ if have("transformers") else None,
          "dir": str(data), "file_system": fs, "ferry_env": {k: v for k, v in env.items() if k.startswith("FERRY_")}})

    saves = {} if args.skip_saves else bench_saves(args, emit, data)
    models = {} if args.skip_models else bench_models(args, emit, data, env)

    def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
        return a / b if a is not None and b else None

    med = saves.get("median_gb_per_s", {})
    bg = saves.get("background", {})
    ratios = {
        "page_cache_vs_safetensors": ratio(med.get("ferry_page_cache"), med.get("safetensors_page_cache")),
        "scratch_vs_durable": ratio(med.get("ferry_scratch"), med.get("ferry_durable")),
        "durable_vs_raw_o_direct": ratio(med.get("ferry_durable"), saves.get("raw_o_direct_gb_per_s")),
        "durable_vs_safetensors_fsync": ratio(med.get("ferry_durable"), med.get("safetensors_fsync")),
        "snapshot_vs_d2h_ceiling": ratio(bg.get("snapshot_seconds"), bg.get("ceiling_seconds")),
    }
    goals: Dict[str, Optional[bool]] = {
        "page cache >= 3 x safetensors": None if ratios["page_cache_vs_safetensors"] is None
        else ratios["page_cache_vs_safetensors"] >= 3,
        "durable >= 0.9 x raw O_DIRECT": None if ratios["durable_vs_raw_o_direct"] is None
        else ratios["durable_vs_raw_o_direct"] >= 0.9,
        "durable=False >= durable": None if ratios["scratch_vs_durable"] is None else ratios["scratch_vs_durable"] >= 1.0,
        "snapshot <= 1.2 x bytes / D2H ceiling": None if ratios["snapshot_vs_d2h_ceiling"] is None
        else ratios["snapshot_vs_d2h_ceiling"] <= 1.2,
    }
    if models:
        budget = 1.2 * models["bytes"] / (models["h2d_gb_per_s"] * GB) if models["h2d_gb_per_s"] else None
        ratios["model_load_vs_h2d_ceiling"] = ratio(models["load_seconds"], budget / 1.2 if budget else None)
        goals["model load <= 1.2 x bytes / H2D ceiling"] = None if budget is None else models["load_seconds"] <= budget
        goals["construction + load < from_pretrained"] = (models["construct_and_load_seconds"]
                                                          < models["from_pretrained_seconds"])
        goals["same logits"] = models["same_logits"]
    emit({"kind": "summary", "saves": saves, "models": models, "ratios": ratios, "goals": goals,
          "total_seconds": time.time() - started})
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "safetensors-save-bench.jsonl").write_text("".join(json.dumps(l, default=str) + "\n" for l in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
