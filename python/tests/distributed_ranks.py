"""Launching the ranks of a distributed-load test, and the checkpoint they load.

run_ranks() starts one process per rank (distributed_worker.py), which join a group through a file:// store
in the test's directory, run the spec's scenario and write what they saw; it returns each rank's record,
or, for a rank that wrote none (killed), its exit status and output. write_checkpoint() saves a sharded
checkpoint of assorted dtypes and shapes through ferry.safetensors.save_sharded and returns its tensors.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import ferry

WORKER = Path(__file__).with_name("distributed_worker.py")


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(ferry.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("OMP_NUM_THREADS", "1")  # the 2-core CI machine runs up to 4 ranks
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # NVLink multicast stays off on shared GPU hosts (the lent machines' rule; NCCL works without it).
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    return env


def run_ranks(tmp_path: Path, world: int, spec: Dict[str, Any], limit_s: float = 45.0,
              hung: Iterable[int] = ()) -> List[Dict[str, Any]]:
    """Runs ``spec`` on ``world`` ranks (with ``spec["env"]`` added to their environment); each record has
    ``rank``, ``ok`` and what the worker wrote, or
    ``returncode`` and ``output`` for a rank that wrote nothing. Ranks in ``hung`` are expected to hang:
    they are killed once the others have ended. Fails the test when any other rank runs past ``limit_s``."""
    out = tmp_path / "ranks"
    out.mkdir(exist_ok=True)
    rendezvous = tmp_path / "rendezvous"
    if rendezvous.exists():
        rendezvous.unlink()
    spec = dict(spec, world=world, out=str(out), rendezvous=str(rendezvous))
    env = dict(_env(), **spec.get("env", {}))
    procs = [subprocess.Popen([sys.executable, str(WORKER), json.dumps(spec), str(r)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=env) for r in range(world)]
    hung = set(hung)
    deadline = time.monotonic() + limit_s
    late = []
    try:
        for r, p in enumerate(procs):
            if r in hung:
                continue
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                late.append(r)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    outputs = [p.stdout.read().decode(errors="replace") if p.stdout else "" for p in procs]
    for p in procs:
        if p.stdout:
            p.stdout.close()
    if late:
        raise AssertionError(f"ranks {late} ran past {limit_s} s:\n" + "\n".join(outputs[r][-3000:] for r in late))
    records = []
    for r, p in enumerate(procs):
        path = out / f"rank{r}.json"
        record = json.loads(path.read_text()) if path.exists() else {"rank": r, "ok": False, "wrote": False}
        record["returncode"] = p.returncode
        record["output"] = outputs[r]
        records.append(record)
    return records


def failed(records: Sequence[Dict[str, Any]]) -> str:
    """A readable account of records that did not succeed, for assertion messages."""
    return "\n".join(f"rank {r['rank']}: {r.get('error_type')}: {r.get('error')}\n{r.get('traceback', r.get('output', ''))}"
                     for r in records if not r["ok"])


# ------------------------------------------------------------------------------------------ checkpoint


def tensors_for_test() -> Dict[str, Any]:
    """Assorted dtypes and shapes (0-d, empty, odd sizes, bool), a 128 KiB tensor (long enough for O_DIRECT
    bodies), and layer-like matrices that tensor-parallel rules split."""
    import torch

    g = torch.Generator().manual_seed(25)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)

    t = {
        "embed.weight": randn(97, 33),
        "big": randn(128, 256),
        "step": torch.tensor(123456789, dtype=torch.int64),
        "mask": torch.rand(5, 7, generator=g) > 0.5,
        "empty": torch.empty(0, 4),
        "codes": torch.randint(0, 256, (1001,), generator=g, dtype=torch.uint8),
        "lm_head.weight": randn(97, 33),
    }
    for layer in range(2):
        t[f"layers.{layer}.q.weight"] = randn(64, 48, dtype=torch.bfloat16)
        t[f"layers.{layer}.o.weight"] = randn(48, 64, dtype=torch.float16)
        t[f"layers.{layer}.norm"] = randn(48)
        t[f"layers.{layer}.conv"] = randn(6, 5, 7, dtype=torch.float64)
    return t


def write_checkpoint(directory: Path, max_shard_size: int = 40_000) -> Dict[str, Any]:
    """Saves tensors_for_test() as a sharded checkpoint (several shards and an index) in ``directory``."""
    from ferry.safetensors import save_sharded

    tensors = tensors_for_test()
    directory.mkdir(parents=True, exist_ok=True)
    save_sharded(tensors, str(directory), max_shard_size=max_shard_size, metadata={"format": "pt"})
    return tensors


def digest(t: Any) -> Tuple[str, str, List[int]]:
    """What the worker reports for a tensor: (sha256 of its bytes, dtype, shape)."""
    import torch

    data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return (hashlib.sha256(data).hexdigest(), str(t.dtype).replace("torch.", ""), list(t.shape))


def nbytes(t: Any) -> int:
    return t.numel() * t.element_size()


def expected(tensors: Dict[str, Any], rules: Any = None, rank: int = 0, world: int = 1) -> Dict[str, List[Any]]:
    """What a rank must hold, as the worker describes it: every tensor, or its slice under ``rules``."""
    from ferry import _dist_plan

    out = {}
    for name, t in tensors.items():
        applies, rule = _dist_plan.rule_for(rules, name)
        box = _dist_plan.slice_box(rule, name, tuple(t.shape), rank, world) if applies else None
        out[name] = list(digest(t if box is None else t[tuple(slice(a, b) for a, b in box)]))
    return out


def assert_each_byte_read_once(records: Sequence[Dict[str, Any]], checkpoint_bytes: int,
                               route: Optional[str] = None) -> None:
    """Every rank's report adds up to the checkpoint exactly once: the all_reduce each rank made of its bytes
    read and of its route report's bytes, and the per-rank table every rank got, whose bytes all took
    ``route`` (None: whichever routes)."""
    for r in records:
        s = r["stats"]
        assert r["group"]["sum_bytes_read"] == checkpoint_bytes, s
        assert r["group"]["sum_report_bytes"] == checkpoint_bytes
        assert s["group_bytes_read"] == checkpoint_bytes
        assert [x["bytes_read"] for x in s["ranks"]] == [q["stats"]["bytes_read"] for q in records]
        routed = [b for x in s["ranks"] for name, (_, b) in x["routes"].items() if route in (None, name)]
        assert sum(routed) == checkpoint_bytes, s["ranks"]
