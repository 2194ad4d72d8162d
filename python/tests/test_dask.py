"""ferry.dask on a multi-process dask.distributed LocalCluster (2 workers): local shards through Ferry's
engine and remote shards through the same ferry.open, each task's route report gathered back. Skips, saying why, where
dask or distributed is missing (Debian: python3-dask, python3-distributed; scripts/install-deps.sh)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ferry
import ferry.remote

dask = pytest.importorskip("dask", reason="dask is not installed (Debian: python3-dask)")
distributed = pytest.importorskip("distributed", reason="distributed is not installed (Debian: python3-distributed)")
import ferry.dask  # noqa: E402

from remote_servers import serve_directory  # noqa: E402

SHARDS = 6
SHARD_SHAPE = (64, 1000)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    base = tmp_path_factory.mktemp("dask")
    root = base / "root"
    root.mkdir()
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(SHARD_SHAPE).astype(np.float32) for _ in range(SHARDS)]
    paths = []
    for i, a in enumerate(arrays):
        p = root / f"shard-{i:03d}.bin"
        p.write_bytes(a.tobytes())
        paths.append(str(p))
    return base, root, arrays, paths


# First, before the module's cluster exists: with a distributed client active, dask warns that a local
# scheduler runs instead.
def test_short_shard_is_an_error(shards):
    _, root, _, paths = shards
    arr = ferry.dask.read_array(paths[:1], (SHARD_SHAPE[0] * 2, SHARD_SHAPE[1]), np.float32, device="cpu")
    with pytest.raises(EOFError, match="holds"):
        arr.compute(scheduler="synchronous")


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        # Debian 12's distributed calls tornado's IOLoop.make_current, which its tornado deprecates.
        warnings.filterwarnings("ignore", "make_current is deprecated", DeprecationWarning)
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
        )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_local_shards_as_array_on_a_process_cluster(shards, client):
    _, _, arrays, paths = shards
    arr, reports = ferry.dask.read_array(paths, SHARD_SHAPE, np.float32, device="cpu", with_reports=True)
    assert arr.shape == (SHARDS * SHARD_SHAPE[0], SHARD_SHAPE[1])
    assert arr.numblocks == (SHARDS, 1)
    values, reps = dask.compute(arr, reports)
    assert np.array_equal(values, np.concatenate(arrays))
    assert [r["shard"] for r in reps] == paths
    summary = ferry.dask.summarize(reps)
    assert summary["shards"] == SHARDS
    assert summary["bytes"] == SHARDS * SHARD_SHAPE[0] * SHARD_SHAPE[1] * 4
    assert all(r["route"] == "host" for r in reps), summary["routes"]
    assert all(r["report"]["total_bytes"] == r["bytes"] for r in reps)
    import os

    assert all(r["pid"] != os.getpid() for r in reps)  # read in the worker processes, not here
    assert len(summary["workers"]) == 2, summary["workers"]


def test_remote_shards_and_a_bag(shards, client):
    if not ferry.remote.available():
        pytest.skip("Ferry was built without remote objects")
    base, root, arrays, _ = shards
    server = serve_directory(root, base / "nginx")
    try:
        urls = [server.url(f"shard-{i:03d}.bin") for i in range(SHARDS)]
        arr, reports = ferry.dask.read_array(
            urls, SHARD_SHAPE, "float32", device="cpu", with_reports=True, settings={"remote_connections": 2}
        )
        total, reps = dask.compute(arr.sum(dtype=np.float64), reports)
        assert total == pytest.approx(float(np.concatenate(arrays).sum(dtype=np.float64)), rel=1e-9)
        assert all(r["route"] == "host" for r in reps), [r["route"] for r in reps]  # the route report's own
        assert all(any(" 0 retries" in n for n in r["report"]["notes"]) for r in reps)
        pairs = ferry.dask.read_bag(urls[:3], SHARD_SHAPE, np.float32, device="cpu").compute()
        assert len(pairs) == 3
        for (a, rep), expected in zip(pairs, arrays[:3]):
            assert np.array_equal(a, expected)
            assert rep["bytes"] == expected.nbytes
    finally:
        server.stop()

