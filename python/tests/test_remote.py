"""URLs through ferry.open (and ferry.remote.read, the convenience over it) against nginx on loopback: reads
into NumPy, errors as Python exceptions, no secrets in messages, writes refused. The fault matrix is covered
by the C++ tests (tests/remote) and test_issue_23_remote.py."""

from __future__ import annotations

import numpy as np
import pytest

import ferry
import ferry.remote

from remote_servers import serve_random_object

pytestmark = pytest.mark.skipif(not ferry.remote.available(), reason="Ferry was built without remote objects")

SIZE = 2 * 1024 * 1024 + 4321


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server, _, data = serve_random_object(tmp_path_factory.mktemp("remote"), SIZE, 7)
    yield server, data
    server.stop()


def test_read_whole_object_into_numpy(served):
    server, data = served
    got = ferry.remote.read(server.url("obj.bin"), remote_connections=4, task_size="256KiB")
    assert got.dtype == np.uint8 and got.shape == (SIZE,)
    assert np.array_equal(got, data)
    assert np.array_equal(ferry.remote.read(server.url("obj.bin"), size=100, offset=SIZE - 10), data[-10:])


def test_read_into_typed_buffer_at_offset_and_report(served):
    server, data = served
    with ferry.open(server.url("obj.bin"), remote_connections=3, task_size="64KiB") as f:
        assert f.size() == SIZE and f.path == server.url("obj.bin")
        out = np.zeros(1000, dtype=np.float32)
        assert f.pread(out, offset=12345).result() == 4000
        assert out.tobytes() == data[12345:16345].tobytes()
        report = f.report()
    assert report.routes_used == {"host": 1}
    note = next(n for n in report["notes"] if "HTTP requests" in n)
    assert "2 HTTP requests, 0 retries" in note and "ETag" in note


def test_missing_object_is_file_not_found_without_query(served):
    server, _ = served
    with pytest.raises(FileNotFoundError) as e:
        ferry.remote.read(server.url("missing.bin") + "?X-Amz-Signature=topsecret")
    assert "missing.bin" in str(e.value)
    assert "topsecret" not in str(e.value)


def test_writes_are_refused(served):
    server, _ = served
    with pytest.raises(OSError, match="remote writes are not supported yet") as e:
        ferry.open(server.url("obj.bin"), "w")
    assert e.value.code == "failed_precondition"


def test_bad_settings_and_credentials(served):
    server, _ = served
    with pytest.raises(ValueError, match="remote_connections"):
        ferry.open(server.url("obj.bin"), remote_connections=0)
    with pytest.raises(TypeError, match="unknown setting 'unknown_thing'"):
        ferry.open(server.url("obj.bin"), unknown_thing=1)
    with pytest.raises(TypeError, match="ferry.remote.Credentials"):
        ferry.open(server.url("obj.bin"), credentials=("AKID", "secret"))
    assert "remote_connections" in ferry.config.as_dict()
    assert not any("secret" in s.name for s in ferry.config.settings())


def test_is_remote_url_and_display_url():
    assert ferry.remote.is_remote_url("s3://b/k")
    assert not ferry.remote.is_remote_url("/tmp/x")
    assert ferry.remote.display_url("https://u:p@h/x?sig=1") == "https://h/x"


def test_ferry_open_takes_a_url_like_a_path(served):
    """Issue 15 through the seam: ferry.open(url) is a File like any other (host memory here)."""
    server, data = served
    with ferry.open(server.url("obj.bin")) as f:
        buf = np.full(SIZE + 64, 0xA5, dtype=np.uint8)
        n = f.pread(buf, offset=12345).result()
        assert n == SIZE - 12345
        assert np.array_equal(buf[:n], data[12345:])
        assert (buf[n:] == 0xA5).all(), "bytes written past the count"


def test_cli_reads_a_url(served):
    """`ferry read URL --json` reads the object and reports it (the CLI's own byte check with --verify)."""
    import json
    import subprocess

    from conftest import cli_path

    server, _ = served
    cli = cli_path()
    if cli is None:
        pytest.skip("the ferry CLI was not found (set FERRY_CLI or build with FERRY_BUILD_CLI=ON)")
    out = subprocess.run([cli, "read", server.url("obj.bin"), "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["bytes"] == SIZE
    assert any("HTTP requests" in n for n in doc["report"]["notes"]), doc["report"]["notes"]


def test_url_into_gpu_memory(served, cp):
    """A URL read into CuPy memory goes through the staged route, byte-exact (GPU machine)."""
    server, data = served
    with ferry.open(server.url("obj.bin")) as f:
        dev = cp.full(SIZE + 64, 0xA5, dtype=cp.uint8)
        n = f.pread(dev, size=SIZE).result()
        assert n == SIZE
        got = cp.asnumpy(dev)
        assert np.array_equal(got[:SIZE], data)
        assert (got[SIZE:] == 0xA5).all()
        assert f.report().routes_used == {"staged": f.report()["total_ops"]}
        assert "source_not_a_file" in [r["reason"] for r in f.report()["reasons"]]
