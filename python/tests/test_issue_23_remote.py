"""Issue 23, the remote items: hostile or unlucky servers (tests/remote/fault_proxy.py in front of nginx on
loopback, the S3 server of tests/remote/s3rver) must not hang a read, leak a secret into any output, mix two
versions of an object, allocate what a server merely claims, or confuse the CLI. Each test failed on d7cbac4.
Everything that could hang runs under a watchdog (faulthandler) or a subprocess timeout."""

from __future__ import annotations

import faulthandler
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ferry
import ferry.remote

from conftest import cli_path
from remote_servers import FaultProxy, serve_random_object

pytestmark = pytest.mark.skipif(not ferry.remote.available(), reason="Ferry was built without remote objects")

SIZE = 3 * 1024 * 1024 + 4321
SECRETS = ("PASSWORD", "SIGVALUE", "hunter2")


@pytest.fixture(autouse=True)
def _watchdog():
    """Prints every thread's stack and ends the run if a test hangs (a C++ wait cannot be interrupted)."""
    faulthandler.dump_traceback_later(120, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server, root, data = serve_random_object(tmp_path_factory.mktemp("issue23"), SIZE, 23)
    yield server, root, data
    server.stop()


@pytest.fixture
def proxy(served):
    server, _, _ = served
    p = FaultProxy(server.port)
    yield p
    p.stop()


def _cli():
    cli = cli_path()
    if cli is None:
        pytest.skip("the ferry CLI was not found (set FERRY_CLI or build with FERRY_BUILD_CLI=ON)")
    return cli


def _no_secret(text: str) -> None:
    for s in SECRETS:
        assert s not in text, f"{s!r} shown in {text!r}"


# ---- High 3: a slow server must not hang a read


def test_cancel_ends_a_transfer_from_a_trickling_server(served, proxy):
    _, _, data = served
    proxy.set("slow:2000")  # 2000 bytes/s: a 4 MiB task would take half an hour
    f = ferry.open(proxy.url("obj.bin"))
    buf = np.empty(SIZE, np.uint8)
    fut = f.pread(buf)
    time.sleep(0.5)
    cancelled = threading.Thread(target=fut.cancel)
    start = time.monotonic()
    cancelled.start()
    cancelled.join(10)
    try:
        assert not cancelled.is_alive(), "Future.cancel() still waits for the trickling transfer after 10 s"
        assert time.monotonic() - start < 2
        assert fut.cancelled()
        with pytest.raises(ferry.CancelledError):
            fut.result()
    finally:
        proxy.stop()  # on failure: lets the transfer end, so that the future can be dropped
        cancelled.join()
        f.close()


def test_a_request_too_slow_for_remote_min_rate_is_abandoned(served, proxy):
    proxy.set("slow:20000")
    start = time.monotonic()
    with pytest.raises(ferry.UnavailableError, match="below remote_min_rate") as e:
        ferry.remote.read(proxy.url("obj.bin"), task_size="1MiB", remote_min_rate="1MiB",
                          remote_stall_timeout_ms=500, remote_max_retries=1, remote_retry_delay_ms=1)
    assert time.monotonic() - start < 10
    assert "after 1 retries" in str(e.value) and proxy.url("obj.bin") in str(e.value)


_CTRL_C_CHILD = textwrap.dedent("""
    import faulthandler, os, signal, sys, threading, time
    import numpy as np
    import ferry
    faulthandler.dump_traceback_later(25, exit=True)
    f = ferry.open(sys.argv[1])
    buf = np.empty(f.size(), np.uint8)
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        f.pread(buf).result()
        print("finished")
    except KeyboardInterrupt:
        print("interrupted after %.2f s" % (time.monotonic() - start))
""")


def test_ctrl_c_interrupts_a_read_from_a_trickling_server(served, proxy):
    proxy.set("slow:2000")
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", _CTRL_C_CHILD, proxy.url("obj.bin")], capture_output=True,
                         text=True, timeout=60, env=env)
    assert "interrupted after" in out.stdout, out.stdout + out.stderr
    assert float(out.stdout.split()[2]) < 3, out.stdout


# ---- Low: the stall timeout is checked in the transfer, to the documented resolution


def test_stall_timeout_is_checked_within_the_transfer(served, proxy, monkeypatch):
    proxy.set("stall:1000")  # the headers and 1000 bytes, then nothing
    monkeypatch.setenv("FERRY_REMOTE_STALL_TIMEOUT_MS", "300")
    monkeypatch.setenv("FERRY_REMOTE_MAX_RETRIES", "0")
    ferry.config.reset()
    f = ferry.open(proxy.url("obj.bin"))
    start = time.monotonic()
    with pytest.raises(ferry.UnavailableError, match=r"no byte for 300 ms \(remote_stall_timeout_ms\)"):
        f.pread(np.empty(SIZE, np.uint8)).result()
    assert time.monotonic() - start < 1.0
    f.close()


# ---- High 4: credentials in URLs never reach any output


def _safetensors_bytes() -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    header += b" " * (-len(header) % 8)
    return len(header).to_bytes(8, "little") + header + np.arange(4, dtype=np.float32).tobytes()


def _secret_url(server, name: str) -> str:
    return f"http://user:PASSWORD@127.0.0.1:{server.port}/{name}?X-Amz-Signature=SIGVALUE&token=hunter2"


def test_secrets_in_urls_stay_out_of_python_outputs(served):
    server, root, _ = served
    (root / "m.safetensors").write_bytes(_safetensors_bytes())
    url = _secret_url(server, "m.safetensors")
    with ferry.open(url) as f:
        _no_secret(f.path + repr(f) + str(f.report()))
    loaded = ferry.safetensors.load(url, device="cpu", framework="numpy")
    assert np.array_equal(loaded.tensors["w"], np.arange(4, dtype=np.float32))
    _no_secret(repr(loaded.stats["files"]) + repr(loaded) + json.dumps(dict(loaded.report), default=str))
    with ferry.safetensors.safe_open(url, framework="numpy") as st:
        _no_secret(repr(st.files()) + repr(st))
    for missing in ("missing.safetensors", "missing.bin"):
        with pytest.raises(FileNotFoundError) as e:
            if missing.endswith(".bin"):
                ferry.open(_secret_url(server, missing))
            else:
                ferry.safetensors.load_file(_secret_url(server, missing), device="cpu", framework="numpy")
        _no_secret(str(e.value) + repr(e.value.args) + str(e.value.filename))
        assert e.value.filename == f"http://127.0.0.1:{server.port}/{missing}"


def test_secrets_in_urls_stay_out_of_cli_outputs(served):
    server, root, _ = served
    (root / "m.safetensors").write_bytes(_safetensors_bytes())
    cli = _cli()
    for args in (["read", _secret_url(server, "obj.bin")], ["read", _secret_url(server, "obj.bin"), "--json"],
                 ["load", _secret_url(server, "m.safetensors")], ["load", _secret_url(server, "m.safetensors"), "--json"],
                 ["read", _secret_url(server, "missing.bin"), "--json"]):
        out = subprocess.run([cli, *args], capture_output=True, text=True, timeout=120)
        _no_secret(out.stdout + out.stderr)
        if "--json" in args:
            doc = json.loads(out.stdout)
            assert doc.get("path") in (f"http://127.0.0.1:{server.port}/obj.bin",
                                       f"http://127.0.0.1:{server.port}/m.safetensors",
                                       f"http://127.0.0.1:{server.port}/missing.bin", None), doc


# ---- High 5: ferry.dask keeps secrets out of the task graph


def test_dask_graphs_carry_no_secret(served):
    dask = pytest.importorskip("dask", reason="dask is not installed (Debian: python3-dask)")
    import ferry.dask

    server, _, data = served
    url = _secret_url(server, "obj.bin")
    arr = ferry.dask.read_array([url], (1024,), "uint8", device="cpu")
    graph = dict(arr.__dask_graph__())
    _no_secret(repr(graph) + str(graph))
    assert np.array_equal(arr.compute(scheduler="synchronous"), data[:1024])
    with pytest.raises(TypeError, match="task graph"):
        ferry.dask.read_array([url], (1024,), "uint8", device="cpu",
                              settings={"secret_access_key": "hunter2"})
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(ferry.remote.Credentials("AKID", "hunter2"))
    assert "hunter2" not in repr(ferry.remote.Credentials("AKID", "hunter2", "hunter2"))
    del dask


# ---- High 6: the first answer's ETag is the object's when HEAD has none


def test_answers_with_changing_etags_are_refused_when_head_had_none(served, proxy):
    proxy.set("etag_flip", on="ANY")
    with pytest.raises(OSError, match="object changed during the read") as e:
        with ferry.open(proxy.url("obj.bin"), task_size="256KiB") as f:
            f.pread(np.empty(SIZE, np.uint8)).result()
    assert e.value.code == "failed_precondition"


# ---- Medium 1: claimed sizes are not allocated before bytes arrive


def _peak_rss_kib(proc: subprocess.Popen) -> int:
    """The child's VmHWM (peak resident memory since its exec), polled until it exits."""
    peak = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.02)
    return peak


def test_cli_read_of_a_huge_claimed_object_stays_small(served, proxy):
    proxy.set("claim:%d" % (2 << 30), on="ANY")  # 2 GiB claimed, then not a byte
    env = dict(os.environ, FERRY_REMOTE_STALL_TIMEOUT_MS="500", FERRY_REMOTE_MAX_RETRIES="0")
    proc = subprocess.Popen([_cli(), "read", proxy.url("obj.bin")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    timer = threading.Timer(60, proc.kill)
    timer.start()
    peak = _peak_rss_kib(proc)
    timer.cancel()
    stderr = proc.communicate()[1].decode()
    assert proc.returncode == 1, stderr
    assert 0 < peak < 256 * 1024, f"peak RSS {peak} KiB for a server that sent nothing"


# ---- Medium 2: S3 bucket names are checked before anything is sent


def test_bucket_names_that_reach_other_hosts_are_refused(monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "hunter2")
    monkeypatch.setenv("FERRY_S3_ADDRESSING", "virtual_host")
    monkeypatch.setenv("FERRY_REMOTE_MAX_RETRIES", "0")
    ferry.config.reset()
    try:
        with pytest.raises(ValueError, match="bucket name") as e:
            ferry.open(f"s3://2130706433:{port}#/key")
        assert e.value.code == "invalid_argument"
        with pytest.raises(socket.timeout):
            listener.accept()  # nothing connected
    finally:
        listener.close()


# ---- Medium 3: a complete part whose transfer then errors is done


def test_a_complete_body_without_its_last_chunk_is_not_retried(served, proxy):
    _, _, data = served
    proxy.set("chunked_no_end")
    with ferry.open(proxy.url("obj.bin"), task_size="1MiB") as f:
        buf = np.empty(SIZE, np.uint8)
        assert f.pread(buf).result() == SIZE
        assert np.array_equal(buf, data)
        notes = " ".join(f.report()["notes"])
    assert " 0 retries" in notes, notes


# ---- Medium 5: an ETag with bytes >= 0x80 does not break reports


def test_etags_with_high_bytes_reach_reports_and_dask(served, proxy):
    _, _, data = served
    pytest.importorskip("dask", reason="dask is not installed (Debian: python3-dask)")
    import ferry.dask

    proxy.set("etag_bytes", on="ANY")
    arr, report = ferry.dask.read_shard(proxy.url("obj.bin"), (4096,), "uint8", device="cpu")
    assert np.array_equal(arr, data[:4096])
    notes = " ".join(report["report"]["notes"])
    assert '"\udcff\udcfe-etag"' in notes, notes


# ---- Low: server text with terminal escapes is escaped


def test_status_text_and_s3_messages_have_their_control_bytes_escaped(served, proxy):
    body = "<Error><Code>AccessDenied</Code><Message>\x1b]0;pwned\x07 no</Message></Error>"
    proxy.set("status:403", on="ANY", reason="Forbidden \x1b[31mred", body=body)
    with pytest.raises(PermissionError) as e:
        ferry.open(proxy.url("obj.bin"))
    text = str(e.value)
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    assert "\\x1b[31mred" in text and "\\x1b]0;pwned\\x07" in text, text


# ---- Low: --verify of a URL uses the settings, and a failed read-back is exit 1


def test_verify_of_a_url_reads_back_with_the_settings(served, proxy):
    # The main read (a HEAD and one GET) passes; the read-back meets 503 six times: more than the default
    # retries, fewer than FERRY_REMOTE_MAX_RETRIES.
    proxy.set("status:503", count=6, after=1)
    env = dict(os.environ, FERRY_REMOTE_MAX_RETRIES="8", FERRY_REMOTE_RETRY_DELAY_MS="1", FERRY_TASK_SIZE="16MiB")
    out = subprocess.run([_cli(), "read", proxy.url("obj.bin"), "--verify"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "verify: OK" in out.stdout


def test_verify_whose_read_back_fails_is_exit_1_not_a_mismatch(served, proxy):
    proxy.set("status:404", after=1)
    env = dict(os.environ, FERRY_TASK_SIZE="16MiB")
    out = subprocess.run([_cli(), "read", proxy.url("obj.bin"), "--verify"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "verify FAILED" not in out.stdout
    assert "compared nothing" in out.stderr and "HTTP 404" in out.stderr, out.stderr


# ---- Low: ferry write and ferry-bench refuse URLs


@pytest.mark.parametrize("command", [["write", "--size", "4096"], ["bench", "--size", "4096", "--op", "write"]])
def test_write_and_bench_refuse_urls(tmp_path, command):
    (tmp_path / "http:" / "127.0.0.1:9").mkdir(parents=True)
    url = "http://127.0.0.1:9/x.bin"
    if command[0] == "bench":  # the benchmark is its own program, beside ferry
        args = [os.path.join(os.path.dirname(_cli()), "ferry-bench"), url, *command[1:]]
    else:
        args = [_cli(), command[0], url, *command[1:]]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "is a URL" in out.stderr
    assert list((tmp_path / "http:" / "127.0.0.1:9").iterdir()) == []


# ---- Low: weak ETags are not sent in If-Match


def test_weak_etags_are_not_sent_in_if_match(served, proxy):
    _, _, data = served
    proxy.set("weak_etag", on="ANY")
    with ferry.open(proxy.url("obj.bin"), task_size="1MiB") as f:
        got = np.empty(SIZE, np.uint8)
        assert f.pread(got).result() == SIZE
    assert np.array_equal(got, data)
    assert all(not if_match.startswith("W/") for _, _, if_match in proxy.log())


# ---- Low: option types are checked and NUL bytes refused


def test_remote_option_types_are_checked_and_nul_refused(served):
    server, _, _ = served
    url = server.url("obj.bin")
    with pytest.raises(TypeError, match="takes an int"):
        ferry.remote.read(url, remote_connections=2.5)
    with pytest.raises(TypeError, match="takes an int"):
        ferry.remote.read(url, remote_connections=True)
    with pytest.raises(OverflowError):
        ferry.remote.read(url, remote_max_retries=2**70)
    with pytest.raises(ValueError, match="remote_connections"):
        ferry.remote.read(url, remote_connections=0)
    with pytest.raises(ValueError, match="null"):
        ferry.remote.read(url + "\x00/../private")


# ---- Low: AWS files with upper-case keys, and named profiles without credentials


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    dirs = Path(__file__).resolve().parents[2] / "tests" / "remote" / "s3rver"
    node = "/usr/bin/node" if os.access("/usr/bin/node", os.X_OK) else "/usr/local/bin/node"
    if not os.access(node, os.X_OK) or not (dirs / "node_modules" / "@20minutes" / "s3rver").exists():
        pytest.skip("the S3 test server is not installed (scripts/install-deps.sh installs it)")
    base = tmp_path_factory.mktemp("s3")
    (base / "src").mkdir()
    data = np.random.default_rng(5).integers(0, 256, 100000, dtype=np.uint8)
    (base / "src" / "obj.bin").write_bytes(data.tobytes())
    (base / "data").mkdir()
    proc = subprocess.Popen([node, str(dirs / "s3_server.js"), str(base / "data"), "bkt", str(base / "src")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().split()
    assert line and line[0] == "port", line
    yield f"http://127.0.0.1:{line[1]}", base, data
    proc.stdin.close()
    proc.wait(10)


def test_upper_case_keys_in_the_credentials_file_sign_requests(s3, monkeypatch):
    endpoint, base, data = s3
    (base / "credentials").write_text("[team]\nAWS_ACCESS_KEY_ID = S3RVER\nAWS_Secret_Access_Key = S3RVER\n")
    (base / "config").write_text("[profile empty]\nregion = us-east-1\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(base / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(base / "config"))
    monkeypatch.setenv("FERRY_S3_ENDPOINT", endpoint)
    monkeypatch.setenv("AWS_PROFILE", "team")
    ferry.config.reset()
    assert np.array_equal(ferry.remote.read("s3://bkt/obj.bin"), data)
    monkeypatch.setenv("AWS_PROFILE", "empty")
    with pytest.raises(ValueError, match='"empty".*holds no aws_access_key_id'):
        ferry.remote.read("s3://bkt/obj.bin")
