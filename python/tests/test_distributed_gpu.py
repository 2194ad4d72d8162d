"""ferry.distributed on GPUs: NCCL, one process per GPU (issue 25). The CPU version, with the plan's
arithmetic and every failure case, is test_distributed.py; these run the same scenarios on GPU memory.

Tests of several ranks skip, saying how many GPUs PyTorch sees, on machines with fewer than two; the group of
one needs one GPU. Run on a multi-GPU machine:
PYTHONPATH=build/python python3 -m pytest python/tests/test_distributed_gpu.py -v
"""

from __future__ import annotations

import pytest

from distributed_ranks import assert_each_byte_read_once, expected, failed, nbytes, run_ranks, write_checkpoint

torch = pytest.importorskip("torch", reason="ferry.distributed needs PyTorch")


def _gpus(needed: int) -> int:
    if not torch.cuda.is_available():
        pytest.skip("PyTorch finds no usable GPU (torch.cuda.is_available() is False)")
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_nccl_available()):
        pytest.skip("this PyTorch has no NCCL backend")
    count = torch.cuda.device_count()
    if count < needed:
        pytest.skip(f"needs {needed} GPUs, PyTorch sees {count}")
    return count


@pytest.fixture
def world():
    return min(_gpus(2), 4)


def _spec(path, **load):
    return {"scenario": "load", "backend": "nccl", "path": str(path), "load": dict({"timeout": 60}, **load)}


@pytest.mark.watchdog(180)
def test_every_gpu_gets_every_byte_and_each_byte_is_read_once(tmp_path, world):
    tensors = write_checkpoint(tmp_path / "ckpt")
    records = run_ranks(tmp_path, world, _spec(tmp_path / "ckpt", part_bytes=4096), limit_s=150)
    assert all(r["ok"] for r in records), failed(records)
    total = sum(nbytes(t) for t in tensors.values())
    for r in records:
        assert r["tensors"] == expected(tensors), f"rank {r['rank']} differs"
        assert r["stats"]["backend"] == "nccl" and r["stats"]["bytes_read"] + r["stats"]["bytes_received"] == total
    assert_each_byte_read_once(records, total)


@pytest.mark.watchdog(180)
def test_tensor_parallel_slices_on_gpus(tmp_path, world):
    tensors = write_checkpoint(tmp_path / "ckpt")
    rules = {"*.q.weight": 0, "*.o.weight": 1, "big": -1, "codes": 0}
    records = run_ranks(tmp_path, world, _spec(tmp_path / "ckpt", part_bytes=8192, shard_rules=rules), limit_s=150)
    assert all(r["ok"] for r in records), failed(records)
    for r in records:
        assert r["tensors"] == expected(tensors, rules, r["rank"], world), f"rank {r['rank']} differs"
    assert_each_byte_read_once(records, sum(nbytes(t) for t in tensors.values()))


@pytest.mark.watchdog(180)
def test_a_gpu_rank_killed_fails_the_others_within_the_timeout(tmp_path, world):
    # NCCL does not notice a dead peer on one host: the load's deadline must. PyTorch's own watchdog, which
    # may end a process when NCCL reports an error, is told not to, so that what is tested is Ferry's error.
    write_checkpoint(tmp_path / "ckpt")
    spec = _spec(tmp_path / "ckpt", part_bytes=4096, timeout=10)
    spec["fault"] = {"rank": 1, "at": "read"}
    spec["env"] = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "NCCL_ASYNC_ERROR_HANDLING": "0"}
    records = run_ranks(tmp_path, world, spec, limit_s=150)
    assert records[1]["returncode"] == -9
    for r in records:
        if r["rank"] == 1:
            continue
        assert not r["ok"] and r["error_type"] in ("DistributedTimeoutError", "DistributedLoadError"), failed([r])
        assert r["seconds"] < 10 + 10 and "rank 1 is furthest behind" in r["error"], r["error"]


@pytest.mark.watchdog(120)
def test_a_group_of_one_gpu_is_the_single_process_load(tmp_path):
    _gpus(1)
    import ferry.safetensors

    tensors = write_checkpoint(tmp_path / "ckpt")
    records = run_ranks(tmp_path, 1, _spec(tmp_path / "ckpt"), limit_s=100)
    assert records[0]["ok"], failed(records)
    s = records[0]["stats"]
    single = ferry.safetensors.load(tmp_path / "ckpt", "cuda:0")
    assert records[0]["tensors"] == expected(tensors)
    assert (s["bytes_read"], s["requests"]) == (single.stats["bytes_read"], single.stats["requests"])
    assert (s["world_size"], s["bytes_received"], s["rounds"], s["agree_seconds"]) == (1, 0, 0, 0.0)
