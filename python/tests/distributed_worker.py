"""One rank of a distributed-load test: joins a torch.distributed group, runs a scenario, writes what it saw.

Run by distributed_ranks.run_ranks as ``python distributed_worker.py SPEC_JSON RANK``. The spec names the
scenario and its arguments; the rank writes ``<out>/rank<R>.json`` with its outcome: ``ok``, the error's
type, text, causes and ``code``, seconds spent, the load's stats, and a sha256 per tensor (of its bytes)
with dtype and shape, so that the test compares every byte on every rank with what it wrote.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import signal
import sys
import time
import traceback


def digest(t) -> str:
    import torch

    return hashlib.sha256(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def describe(tensors) -> dict:
    return {name: [digest(t.cpu()), str(t.dtype).replace("torch.", ""), list(t.shape)] for name, t in tensors.items()}


def bytes_once_check(dist, result) -> dict:
    """The totals every rank reports, added up over the group with an all_reduce (as a user would check)."""
    import torch

    s = result.stats
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([s["bytes_read"], s["bytes_received"], s["report_bytes"]], dtype=torch.int64, device=device)
    dist.all_reduce(t)
    return {"sum_bytes_read": int(t[0]), "sum_bytes_received": int(t[1]), "sum_report_bytes": int(t[2])}


def callable_rule(name, shape, rank, world):
    """Splits matrices along their last dimension, vectors along the first, leaves the rest whole."""
    import ferry.distributed

    if len(shape) >= 2:
        lo, hi = ferry.distributed.split_range(shape[-1], rank, world)
        return (slice(None),) * (len(shape) - 1) + (slice(lo, hi),)
    return 0 if len(shape) == 1 and shape[0] >= world else None


def module_shapes(spec, rank, world) -> dict:
    """name -> (dtype, shape) of the module this rank builds: the checkpoint's, sliced by the spec's
    ``per_rank_shapes`` rules, with ``module_by_rank`` overrides."""
    from ferry import _dist_plan

    rules = spec.get("per_rank_shapes")
    out = {}
    for name, (dtype, shape) in spec["module"].items():
        applies, rule = _dist_plan.rule_for(rules, name)
        box = _dist_plan.slice_box(rule, name, tuple(shape), rank, world) if applies else None
        out[name] = (dtype, shape if box is None else [b - a for a, b in box])
    out.update({k: tuple(v) for k, v in spec.get("module_by_rank", {}).get(str(rank), {}).items()})
    return out


def main() -> None:
    spec = json.loads(sys.argv[1])
    rank = int(sys.argv[2])
    world = spec["world"]
    out = os.path.join(spec["out"], f"rank{rank}.json")
    record = {"rank": rank, "ok": False}
    started = time.monotonic()
    try:
        import torch
        import torch.distributed as dist

        import ferry.safetensors

        backend = spec.get("backend", "gloo")
        if backend == "nccl":
            torch.cuda.set_device(rank)
        init = f"tcp://127.0.0.1:{spec['port']}" if "port" in spec else "file://" + spec["rendezvous"]
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=spec.get("group_timeout", 60)))
        args = dict(spec.get("load", {}))
        args.update(spec.get("load_by_rank", {}).get(str(rank), {}))
        path = spec["paths"][rank] if "paths" in spec else spec["path"]
        device = f"cuda:{rank}" if backend == "nccl" else "cpu"
        if spec.get("rules") == "callable":
            args["shard_rules"] = callable_rule
        fault = spec.get("fault", {})
        if fault.get("rank") == rank:
            if fault["at"] == "start":
                os.kill(os.getpid(), signal.SIGKILL)
            if fault["at"] in ("read", "hang", "cancel"):
                def progress(done, total, at=fault["at"]):
                    if at == "read":
                        os.kill(os.getpid(), signal.SIGKILL)
                    if at == "hang":
                        time.sleep(3600)
                    return at != "cancel"
                args["progress"] = progress
        started = time.monotonic()
        if spec["scenario"] == "load":
            result = ferry.safetensors.load(path, device, process_group=dist.group.WORLD, **args)
            record["seconds"] = time.monotonic() - started
            result.stats["report_bytes"] = int(result.report.get("total_bytes", 0)) if result.report else 0
            record["stats"] = {k: v for k, v in result.stats.items() if k != "report"}
            record["tensors"] = describe(result.tensors)
            record["group"] = bytes_once_check(dist, result)
            record["metadata"] = result.metadata
        elif spec["scenario"] == "module":
            import ferry.torch

            model = torch.nn.Module()
            shapes = module_shapes(spec, rank, world)
            with ferry.torch.meta_parameters():
                for name, (dtype, shape) in shapes.items():
                    owner = model
                    *path_parts, leaf = name.split(".")
                    for part in path_parts:
                        if not hasattr(owner, part):
                            owner.add_module(part, torch.nn.Module())
                        owner = getattr(owner, part)
                    owner.register_parameter(leaf, torch.nn.Parameter(torch.empty(shape, dtype=getattr(torch, dtype)),
                                                                       requires_grad=False))
            got = ferry.torch.load_into_module(model, path, device=device, process_group=dist.group.WORLD, **args)
            record["seconds"] = time.monotonic() - started
            record["missing"], record["unexpected"] = list(got[0]), list(got[1])
            record["stats"] = {k: v for k, v in got.stats.items() if k != "report"}
            record["tensors"] = describe(dict(model.state_dict()))
        record["ok"] = True
    except BaseException as e:  # noqa: B902 - the test wants whatever happened
        record["seconds"] = time.monotonic() - started
        record["error_type"] = type(e).__name__
        record["error"] = str(e)
        record["code"] = getattr(e, "code", None)
        record["causes"] = {str(k): v for k, v in getattr(e, "causes", {}).items()}
        record["cause_type"] = type(e.__cause__).__name__ if e.__cause__ is not None else None
        record["traceback"] = traceback.format_exc()
    with open(out + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(out + ".tmp", out)
    sys.stdout.flush()
    # A group whose collective failed may still have one pending: leave without tearing it down.
    os._exit(0)


if __name__ == "__main__":
    main()
