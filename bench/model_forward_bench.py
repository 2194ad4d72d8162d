#!/usr/bin/env python3
"""What a model loaded through Ferry computes, and how fast, against the same checkpoint through
from_pretrained, in one process (issue 47):

    PYTHONPATH=build-gpu/python python3 bench/model_forward_bench.py [--dir DIR] [--layers 8] [--hidden 4096]
        [--batch 8] [--tokens 512] [--rounds 3] [--passes 20] [--out DIR]

A Llama-shaped transformers model (8 layers, hidden 4096: about 3.4 GB of bf16) is written once with
save_pretrained. The reference is from_pretrained(device_map="cuda:0"); Ferry's is built with
ferry.torch.meta_parameters + from_config and filled by ferry.torch.load_into_module; both bf16 with the same
attention implementation (sdpa). Checked: every parameter and buffer equal, every Ferry parameter 256-byte
aligned, the GPU memory the load allocated against its data + 256 bytes per tensor, and the logits of a
batch of --batch x --tokens random tokens bitwise equal. Timed: forward passes of that batch, the two models
alternating for --rounds rounds of --passes passes each (the best pass of each model per round, and the
median of those).

Prints one JSON line per measurement and a summary with the goals: logits bitwise equal; forward pass
within 1.02x of from_pretrained's; memory <= data + 256 bytes per tensor. Needs torch with CUDA and
transformers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List


def with_dtype(make: Callable[..., Any], *args: Any, dtype: Any, **kwargs: Any) -> Any:
    """transformers 5 spells the dtype argument `dtype`; 4.x `torch_dtype`."""
    try:
        return make(*args, dtype=dtype, **kwargs)
    except TypeError:
        return make(*args, torch_dtype=dtype, **kwargs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="build-gpu/bench-data")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--passes", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch
    import transformers
    import ferry.torch as ft

    lines: List[Dict[str, Any]] = []

    def emit(obj: Dict[str, Any]) -> None:
        lines.append(obj)
        print(json.dumps(obj, default=str), flush=True)

    device = "cuda:0"
    config = transformers.LlamaConfig(
        vocab_size=32000, hidden_size=args.hidden, intermediate_size=args.hidden * 11008 // 4096,
        num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128, num_key_value_heads=args.hidden // 128,
        tie_word_embeddings=False)
    directory = Path(args.dir).resolve() / f"llama-forward-{args.layers}x{args.hidden}"
    if not (directory / "config.json").exists():
        print(f"# writing {directory} with save_pretrained", file=sys.stderr)
        torch.manual_seed(0)
        with torch.device(device):
            model = with_dtype(transformers.AutoModelForCausalLM.from_config, config, dtype=torch.bfloat16)
        model.save_pretrained(directory, safe_serialization=True, max_shard_size="2GB")
        del model
        torch.cuda.empty_cache()
    data = sum(p.stat().st_size for p in directory.glob("*.safetensors"))
    emit({"kind": "environment", "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
          "transformers": transformers.__version__, "checkpoint": str(directory), "file_bytes": data})

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    reference = with_dtype(transformers.AutoModelForCausalLM.from_pretrained, directory, dtype=torch.bfloat16,
                           device_map=device, attn_implementation="sdpa")
    torch.cuda.synchronize()
    emit({"kind": "load", "model": "from_pretrained", "seconds": time.perf_counter() - t0})

    before = torch.cuda.memory_allocated(0)
    t0 = time.perf_counter()
    with ft.meta_parameters(buffers_device=device):
        mine = with_dtype(transformers.AutoModelForCausalLM.from_config, config, dtype=torch.bfloat16,
                          attn_implementation="sdpa")
    t1 = time.perf_counter()
    buffers_bytes = torch.cuda.memory_allocated(0) - before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ft.load_into_module(mine, directory, progress=False)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    allocated = torch.cuda.memory_allocated(0) - before - buffers_bytes
    tensors = len(mine.state_dict())
    tensor_bytes = result.stats["bytes_read"]
    misaligned = [n for n, p in mine.named_parameters() if p.data_ptr() % 256]
    emit({"kind": "load", "model": "ferry", "construct_seconds": t1 - t0, "load_seconds": t2 - t1,
          "bytes": tensor_bytes, "tensors": tensors, "allocated_bytes": allocated,
          "allowed_bytes": tensor_bytes + 256 * tensors, "misaligned": misaligned,
          "warnings": [str(w.message) for w in caught], "route": result.report.summary,
          "requests": result.stats["requests"]})

    ref_state = reference.state_dict()
    unequal = [n for n, t in mine.state_dict().items() if not torch.equal(t, ref_state[n])]
    emit({"kind": "check", "what": "weights", "unequal": unequal})

    generator = torch.Generator(device="cpu").manual_seed(47)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.tokens), generator=generator).to(device)
    with torch.no_grad():
        want = reference(ids).logits
        got = mine(ids).logits
    same = bool(torch.equal(want, got))
    emit({"kind": "check", "what": "logits", "same": same,
          "max_abs_difference": float((want.float() - got.float()).abs().max())})
    del want, got

    def best_pass(model: Any) -> float:
        best = float("inf")
        with torch.no_grad():
            for _ in range(args.passes):
                torch.cuda.synchronize()
                start = time.perf_counter()
                model(ids)
                torch.cuda.synchronize()
                best = min(best, time.perf_counter() - start)
        return best

    for model in (reference, mine):  # warm both up: kernels chosen, allocator grown
        best_pass(model)
    forward: Dict[str, List[float]] = {"from_pretrained": [], "ferry": []}
    for r in range(args.rounds):
        order = [("from_pretrained", reference), ("ferry", mine)]
        for name, model in (order if r % 2 == 0 else order[::-1]):
            seconds = best_pass(model)
            forward[name].append(seconds)
            emit({"kind": "forward", "model": name, "round": r, "best_seconds": seconds})
    med = {k: statistics.median(v) for k, v in forward.items()}
    ratio = med["ferry"] / med["from_pretrained"]
    goals = {
        "logits bitwise equal": same and not unequal,
        "forward <= 1.02 x from_pretrained": ratio <= 1.02,
        "memory <= data + 256 bytes per tensor": allocated <= tensor_bytes + 256 * tensors,
        "every parameter 256-byte aligned": not misaligned,
        "no warning from the load": not caught,
    }
    emit({"kind": "summary", "forward_median_seconds": med, "forward_ratio": ratio, "goals": goals})
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "model-forward-bench.jsonl").write_text("".join(json.dumps(l, default=str) + "\n" for l in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
