"""ferry.kvikio: KvikIO's documented Python API on Ferry (issue 48, point 6), checked with KvikIO's own
examples (its quickstart, the NVIDIA GDS tutorial's CuPy read), byte for byte.

NumPy buffers run everywhere; the CuPy and PyTorch tests skip, saying why, without a usable GPU. The
environment variables are read at import, so those tests run a child interpreter.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ferry
import ferry.kvikio as kvikio
from ferry import _ferry


def _data(size: int, seed: int = 6) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


# ---- KvikIO's examples, with NumPy buffers


def test_the_quickstart_writes_and_reads_back(tmp_path):
    # KvikIO's quickstart, NumPy standing in for CuPy.
    path = tmp_path / "test-file"
    a = np.arange(100)
    f = kvikio.CuFile(path, "w")
    assert f.write(a) == a.nbytes  # all of a
    f.close()
    assert path.read_bytes() == a.tobytes()

    b = np.empty_like(a)
    f = kvikio.CuFile(path, "r")
    assert f.read(b) == a.nbytes  # into all of b
    assert all(a == b)
    f.close()

    c = np.empty_like(a)
    with kvikio.CuFile(path, "r") as f:  # closed by the with block
        f.read(c)
    assert all(a == c)

    d = np.empty_like(a)
    with kvikio.CuFile(path, "r") as f:  # two reads in flight
        future1 = f.pread(d[:50])
        future2 = f.pread(d[50:], file_offset=d[:50].nbytes)
        assert future1.get() == future2.get() == d[:50].nbytes
    assert all(a == d)


def test_the_gds_tutorials_read_into_a_host_array(make_file):
    path, data = make_file(3 << 20, seed=7)
    a = np.empty(data.size, dtype=np.uint8)
    f = kvikio.CuFile(path, "r")
    assert f.read(a) == data.size
    f.close()
    assert np.array_equal(a, data)


def test_kvikios_argument_order_reads_size_bytes_at_file_offset(make_file):
    # Issue 48, B7: KvikIO's pread(buf, size, file_offset). On ferry.File the same call is refused.
    path, data = make_file(1000)
    with kvikio.CuFile(path) as f:
        out = np.zeros(100, dtype=np.uint8)
        assert f.pread(out, 100, 0).get() == 100
        assert np.array_equal(out, data[:100])
        assert f.pread(out, 40, 500).get() == 40
        assert np.array_equal(out[:40], data[500:540]) and np.array_equal(out[40:], data[40:100])
        assert f.read(out, 10, 990) == 10  # the end of the file: fewer bytes than the buffer holds
        assert np.array_equal(out[:10], data[990:])
    with ferry.open(path) as g, pytest.raises(TypeError, match="ferry.kvikio"):
        g.pread(out, 100, 0)


def test_read_takes_an_offset_and_has_no_file_position(make_file):
    path, data = make_file(4096)
    with kvikio.CuFile(path) as f:
        first, second = np.empty(4096, np.uint8), np.empty(4096, np.uint8)
        assert f.read(first) == 4096
        assert f.read(second) == 4096  # offset 0 again, not the end of the file
        assert np.array_equal(first, data) and np.array_equal(second, data)
        tail = np.empty(96, np.uint8)
        assert f.read(tail, file_offset=4000) == 96
        assert np.array_equal(tail, data[4000:])


def test_pwrite_futures_at_offsets_then_read_back(tmp_path):
    path = tmp_path / "pieces.bin"
    data = _data(1 << 20)
    with kvikio.CuFile(path, "w") as f:
        futures = [f.pwrite(data[i:i + (1 << 16)], file_offset=i) for i in range(0, data.size, 1 << 16)]
        assert sum(fut.get() for fut in futures) == data.size
        assert all(fut.done() for fut in futures)
    assert path.read_bytes() == data.tobytes()
    out = np.empty_like(data)
    with kvikio.CuFile(path, "r") as f:
        assert f.pread(out, task_size=1 << 16).get() == data.size
    assert np.array_equal(out, data)


def test_raw_reads_and_writes_take_a_buffer_offset(tmp_path):
    path = tmp_path / "raw.bin"
    data = _data(10_000, seed=8)
    with kvikio.CuFile(path, "w+") as f:
        assert f.raw_write(data, 4000, 100, 2000) == 4000  # data[2000:6000] at file offset 100
        out = np.zeros(8000, np.uint8)
        assert f.raw_read(out, 4000, 100, 3000) == 4000  # into out[3000:7000]
        assert np.array_equal(out[3000:7000], data[2000:6000])
        assert not out[:3000].any() and not out[7000:].any()
        assert f.raw_read(out, file_offset=100, dev_offset=7900) == 100  # size: the rest of the buffer
        assert np.array_equal(out[7900:], data[2000:2100])
        with pytest.raises(ValueError, match="dev_offset 9000 is outside the buffer of 8000 bytes"):
            f.raw_read(out, dev_offset=9000)
    assert path.read_bytes()[100:4100] == data[2000:6000].tobytes()


@pytest.mark.skipif(_ferry.cuda_driver_error() is None,
                    reason="CUDA is usable here: the GPU tests cover raw_read_async")
def test_stream_ordered_calls_without_cuda_raise_through_the_future(make_file):
    path, _ = make_file(4096)
    with kvikio.CuFile(path, "r") as f:
        fut = f.raw_read_async(np.empty(4096, np.uint8), 0)
        with pytest.raises(ferry.UnavailableError):
            fut.check_bytes_done()


# ---- the handle: flags, close, fileno, reports


def test_flags_as_kvikio_opens_files(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"0123456789")
    with kvikio.CuFile(path, "r") as f:
        assert f.open_flags() & os.O_ACCMODE == os.O_RDONLY
        with pytest.raises(ferry.FerryError, match="reading only"):
            f.write(np.zeros(4, np.uint8))
    with kvikio.CuFile(path, "r+") as f:  # read and write, no truncation
        assert f.open_flags() & os.O_ACCMODE == os.O_RDWR
        out = np.empty(10, np.uint8)
        assert f.read(out) == 10 and out.tobytes() == b"0123456789"
        assert f.write(np.frombuffer(b"AB", np.uint8), file_offset=2) == 2
    assert path.read_bytes() == b"01AB456789"
    with kvikio.CuFile(path, "a") as f:  # created if needed, not truncated; writes land at their offsets
        f.write(np.frombuffer(b"Z", np.uint8), file_offset=9)
    assert path.read_bytes() == b"01AB45678Z"
    with kvikio.CuFile(path, "w") as f:  # truncated, write-only
        assert f.open_flags() & os.O_ACCMODE == os.O_WRONLY
        with pytest.raises(ferry.FerryError, match="writing only"):
            f.read(np.empty(4, np.uint8))
        f.write(np.frombuffer(b"new", np.uint8))
    assert path.read_bytes() == b"new"
    with kvikio.CuFile(path, "w+") as f:  # truncated, and readable
        f.write(np.frombuffer(b"again", np.uint8))
        out = np.empty(5, np.uint8)
        assert f.read(out) == 5 and out.tobytes() == b"again"
    with kvikio.CuFile(path, "rb") as f:  # a "b" is ignored
        assert f.read(out) == 5
    for bad in ("x", "rw", "", "r++"):
        with pytest.raises(ValueError, match="CuFile takes"):
            kvikio.CuFile(path, bad)
    with pytest.raises(FileNotFoundError):
        kvikio.CuFile(tmp_path / "missing.bin", "r")


def test_close_closed_fileno_and_the_context_manager(make_file):
    path, _ = make_file(4096)
    f = kvikio.CuFile(path)
    assert not f.closed
    assert os.fstat(f.fileno()).st_size == 4096
    f.close()
    assert f.closed
    f.close()  # twice is allowed
    with pytest.raises(ValueError, match="closed file"):
        f.read(np.empty(16, np.uint8))
    with kvikio.CuFile(path) as g:
        pass
    assert g.closed and "closed" in repr(g)


def test_every_handle_keeps_ferrys_report(make_file):
    path, data = make_file(1 << 20)
    with kvikio.CuFile(path) as f:
        out = np.empty(data.size, np.uint8)
        fut = f.pread(out, task_size=1 << 16)
        assert fut.get() == data.size
        report = fut.report()
        assert isinstance(report, ferry.Report)
        assert report["total_bytes"] == data.size and report["total_ops"] == 16
        assert report.routes_used == {"host": 16}
        f.read(out[:4096])
        whole = f.report()
        assert isinstance(whole, ferry.Report)
        assert whole["total_bytes"] == data.size + 4096
        assert sum(whole.routes_used.values()) == whole["total_ops"] == 17
        assert "host" in str(whole)
    assert np.array_equal(out[:4096], data[:4096])


def test_task_size_and_defaults_changed_after_the_open_apply_to_later_calls(make_file):
    # KvikIO reads task_size (and num_threads, gds_threshold) at every call, not at the open.
    path, data = make_file(1 << 20)
    ferry.config.task_size = "4MiB"
    f = kvikio.CuFile(path)
    out = np.empty(data.size, np.uint8)
    assert f.pread(out).report()["total_ops"] == 1  # the settings of the open: one 4 MiB task
    assert f.pread(out, task_size=1 << 16).report()["total_ops"] == 16  # this call's
    with kvikio.defaults.set("task_size", 1 << 18):
        assert f.pread(out).report()["total_ops"] == 4  # the defaults of the moment
    assert f.read(out) == data.size  # the open's settings again: the file the CuFile opened
    assert f.ferry_file.report()["total_ops"] == 2
    assert f.report()["total_ops"] == 1 + 16 + 4 + 1  # all of them
    assert len(f._handles()) == 3
    f.close()
    assert f.closed and all(g.closed for g in f._handles())
    assert np.array_equal(out, data)


def test_the_compatibility_mode_is_the_one_of_the_open(make_file):
    path, _ = make_file(4096)
    with kvikio.defaults.set("compat_mode", kvikio.CompatMode.ON):
        f = kvikio.CuFile(path)
    with kvikio.defaults.set({"compat_mode": "off", "task_size": 8192}):
        f.read(np.empty(4096, np.uint8))  # another handle, for the task size: still compat mode ON
    assert all(g.config["compat_mode"] == "on" for g in f._handles()) and len(f._handles()) == 2
    f.close()


def test_an_iofuture_is_a_concurrent_futures_future_underneath(make_file):
    path, data = make_file(1 << 20)
    with kvikio.CuFile(path) as f:
        outs = [np.empty(1 << 16, np.uint8) for _ in range(16)]
        futs = [f.pread(o, file_offset=i << 16) for i, o in enumerate(outs)]
        done, not_done = cf.wait([x.future for x in futs], timeout=30)
        assert len(done) == 16 and not not_done and all(x.done() for x in futs)
    assert np.array_equal(np.concatenate(outs), data)


def test_a_failed_request_raises_from_get(make_file):
    path, _ = make_file(100)
    with kvikio.CuFile(path, "r") as f:
        fut = f.pwrite(np.zeros(4, np.uint8))
        with pytest.raises(ferry.FerryError, match="opened for reading only"):
            fut.get()
        assert fut.done()


# ---- kvikio.defaults


def test_defaults_are_ferry_config_under_kvikios_names():
    kvikio.defaults.set("num_threads", 7)
    assert ferry.config.threads == 7 and kvikio.defaults.get("num_threads") == 7
    ferry.config.task_size = "1MiB"
    assert kvikio.defaults.task_size() == kvikio.defaults.get("task_size") == 1 << 20
    ferry.config.compat_mode = "off"
    assert kvikio.defaults.compat_mode() is kvikio.CompatMode.OFF
    kvikio.defaults.set({"gds_threshold": 4096, "bounce_buffer_size": 1 << 20, "compat_mode": kvikio.CompatMode.ON})
    got = (ferry.config.gds_threshold, ferry.config.bounce_buffer_size, ferry.config.compat_mode)
    assert got == (4096, 1 << 20, "on")
    assert kvikio.defaults.get("gds_threshold") == kvikio.defaults.gds_threshold() == 4096
    assert kvikio.defaults.bounce_buffer_size() == 1 << 20


def test_set_as_a_context_manager_puts_back_the_values_it_changed():
    ferry.config.update(threads=3, task_size=1 << 20)
    with kvikio.defaults.set({"num_threads": 9, "task_size": 1 << 16}) as entered:
        assert entered is None
        assert (ferry.config.threads, ferry.config.task_size) == (9, 1 << 16)
        ferry.config.direct_io = "off"  # not KvikIO's to undo
        with kvikio.defaults.set("num_threads", 2):
            assert kvikio.defaults.get("num_threads") == 2
        assert kvikio.defaults.get("num_threads") == 9
    assert (ferry.config.threads, ferry.config.task_size, ferry.config.direct_io) == (3, 1 << 20, "off")
    with pytest.raises(RuntimeError):
        with kvikio.defaults.set("task_size", 4096):
            raise RuntimeError("inside")
    assert ferry.config.task_size == 1 << 20


def test_the_older_style_of_defaults():
    ferry.config.update(threads=4, task_size=1 << 20, gds_threshold=1 << 14, compat_mode="auto")
    kvikio.defaults.num_threads_reset(6)
    assert kvikio.defaults.num_threads() == kvikio.defaults.get_num_threads() == 6
    with kvikio.defaults.set_num_threads(12):
        assert kvikio.defaults.num_threads() == 12
    assert kvikio.defaults.num_threads() == 6
    kvikio.defaults.task_size_reset(1 << 16)
    with kvikio.defaults.set_task_size(1 << 18):
        assert kvikio.defaults.task_size() == 1 << 18
    assert kvikio.defaults.task_size() == 1 << 16
    kvikio.defaults.gds_threshold_reset(1 << 12)
    with kvikio.defaults.set_gds_threshold(0):
        assert kvikio.defaults.gds_threshold() == 0
    assert kvikio.defaults.gds_threshold() == 1 << 12
    kvikio.defaults.bounce_buffer_size_reset(1 << 21)
    with kvikio.defaults.set_bounce_buffer_size(1 << 20):
        assert kvikio.defaults.bounce_buffer_size() == 1 << 20
    assert kvikio.defaults.bounce_buffer_size() == 1 << 21
    kvikio.defaults.compat_mode_reset(True)  # KvikIO before CompatMode took a bool
    assert kvikio.defaults.compat_mode() == kvikio.CompatMode.ON and ferry.config.compat_mode == "on"
    with kvikio.defaults.set_compat_mode(kvikio.CompatMode.AUTO):
        assert ferry.config.compat_mode == "auto"
    kvikio.defaults.compat_mode_reset(False)
    assert kvikio.defaults.compat_mode() == kvikio.CompatMode.OFF
    kvikio.defaults.set_compat_mode("ON")  # applied at once, as KvikIO 25.04 and later do
    assert ferry.config.compat_mode == "on"


@pytest.mark.parametrize("word, mode", [
    ("ON", "ON"), ("on", "ON"), ("True", "ON"), ("YES", "ON"), ("1", "ON"),
    ("OFF", "OFF"), ("false", "OFF"), ("no", "OFF"), ("0", "OFF"), ("Auto", "AUTO"),
])
def test_compat_mode_takes_kvikios_words(word, mode):
    kvikio.defaults.set("compat_mode", word)
    assert kvikio.defaults.get("compat_mode") is kvikio.CompatMode[mode]
    assert ferry.config.compat_mode == mode.lower()


def test_bad_settings_are_refused_and_change_nothing():
    ferry.config.update(threads=4, task_size=1 << 20)
    with pytest.raises(ferry.InvalidArgumentError, match="threads"):
        kvikio.defaults.set({"task_size": 1 << 16, "num_threads": 0})
    assert (ferry.config.threads, ferry.config.task_size) == (4, 1 << 20)
    with pytest.raises(ferry.InvalidArgumentError, match="expected ON, OFF or AUTO"):
        kvikio.defaults.set("compat_mode", "maybe")
    with pytest.raises(TypeError):
        kvikio.defaults.set("task_size", 1.5)
    with pytest.raises(TypeError):
        kvikio.defaults.set("num_threads", True)
    with pytest.raises(KeyError, match="http_max_attempts"):
        kvikio.defaults.get("http_max_attempts")
    with pytest.raises(KeyError, match="settings: compat_mode, num_threads"):
        kvikio.defaults.set("threads", 8)  # Ferry's name, not KvikIO's
    for wrong in ((), ("num_threads",), (8, "num_threads"), ({"num_threads": 8}, 1)):
        with pytest.raises(ValueError, match="dict of settings, or a name and a value"):
            kvikio.defaults.set(*wrong)


def test_is_compat_mode_preferred():
    kvikio.defaults.set("compat_mode", "on")
    assert kvikio.defaults.is_compat_mode_preferred() is True
    kvikio.defaults.set("compat_mode", "off")
    assert kvikio.defaults.is_compat_mode_preferred() is False
    kvikio.defaults.set("compat_mode", "auto")
    direct = bool(ferry.doctor()["prediction"]["direct"])
    assert kvikio.defaults.is_compat_mode_preferred() is (not direct)


# ---- environment variables, read at import: a child interpreter each

_CHILD = r"""
import json, sys
import numpy as np
import ferry
try:
    import ferry.kvikio as kvikio
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
    sys.exit(0)
out = {name: int(kvikio.defaults.get(name)) for name in ("compat_mode", "num_threads", "task_size", "gds_threshold")}
out["ferry"] = ferry.config.as_dict()
if len(sys.argv) > 1:
    with kvikio.CuFile(sys.argv[1]) as f:
        out["ops"] = f.pread(np.empty(1 << 20, np.uint8)).report()["total_ops"]
print(json.dumps(out))
"""


def _child(env: dict, *args: str) -> dict:
    package = Path(ferry.__file__).resolve().parents[1]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KVIKIO_", "FERRY_"))}
    clean.update(env, PYTHONPATH=str(package))
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, env=clean, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("word, mode", [("ON", 1), ("off", 0), ("Auto", 2), ("TRUE", 1), ("no", 0), ("1", 1), ("0", 0)])
def test_kvikio_compat_mode_from_the_environment(word, mode):
    got = _child({"KVIKIO_COMPAT_MODE": word})
    assert got["compat_mode"] == mode
    assert got["ferry"]["compat_mode"] == {0: "off", 1: "on", 2: "auto"}[mode]


def test_kvikio_sizes_and_threads_from_the_environment(make_file):
    path, _ = make_file(1 << 20)
    got = _child({"KVIKIO_NTHREADS": "7", "KVIKIO_TASK_SIZE": "65536", "KVIKIO_GDS_THRESHOLD": "4096"}, str(path))
    assert (got["num_threads"], got["task_size"], got["gds_threshold"]) == (7, 65536, 4096)
    assert (got["ferry"]["threads"], got["ferry"]["task_size"], got["ferry"]["gds_threshold"]) == (7, 65536, 4096)
    assert got["ops"] == 16  # 1 MiB in 64 KiB tasks
    unset = _child({})
    assert unset["ferry"]["threads"] == unset["num_threads"]  # Ferry's own default stays
    assert unset["compat_mode"] == 2


def test_ferrys_own_variables_win_over_kvikios():
    got = _child({"KVIKIO_NTHREADS": "7", "FERRY_THREADS": "3", "KVIKIO_TASK_SIZE": "65536"})
    assert got["num_threads"] == 3 and got["task_size"] == 65536


@pytest.mark.parametrize("variable, text, words", [
    ("KVIKIO_NTHREADS", "0", "KVIKIO_NTHREADS='0' (Ferry's threads)"),
    ("KVIKIO_TASK_SIZE", "lots", "KVIKIO_TASK_SIZE='lots' (Ferry's task_size)"),
    ("KVIKIO_COMPAT_MODE", "maybe", "KVIKIO_COMPAT_MODE: cannot use 'maybe'"),
])
def test_a_bad_kvikio_variable_fails_the_import_naming_it(variable, text, words):
    got = _child({variable: text})
    assert got["error"] == "InvalidArgumentError"
    assert words in got["message"]


# ---- GPU: CuPy and PyTorch (skip without a usable GPU)


def test_the_gds_tutorials_cupy_read(cp, make_file):
    path, data = make_file(9 << 20, seed=9)
    a = cp.empty(data.size, dtype=cp.uint8)
    assert kvikio.CuFile(path, "r").read(a) == data.size
    assert np.array_equal(cp.asnumpy(a), data)


def test_the_quickstart_with_cupy(cp, tmp_path):
    path = tmp_path / "test-file"
    a = cp.arange(100)
    f = kvikio.CuFile(path, "w")
    f.write(a)
    f.close()
    b = cp.empty_like(a)
    with kvikio.CuFile(path, "r") as f:
        f.read(b)
        report = f.report()
    assert bool(cp.all(a == b))
    assert report["total_bytes"] == a.nbytes and "host" not in report.routes_used
    d = cp.empty_like(a)
    with kvikio.CuFile(path, "r") as f:
        future1 = f.pread(d[:50])
        future2 = f.pread(d[50:], file_offset=d[:50].nbytes)
        future1.get()
        future2.get()
    assert bool(cp.all(a == d))


def test_raw_async_calls_on_a_cupy_stream(cp, tmp_path):
    path = tmp_path / "stream.bin"
    data = _data(1 << 20, seed=10)
    stream = cp.cuda.Stream(non_blocking=True)
    src = cp.asarray(data)
    with kvikio.CuFile(path, "w+") as f:
        with stream:
            wrote = f.raw_write_async(src, stream, size=1 << 19, file_offset=4096, dev_offset=1 << 19)
        assert wrote.check_bytes_done() == 1 << 19
        dst = cp.zeros(1 << 20, dtype=cp.uint8)
        read = f.raw_read_async(dst, stream, 1 << 19, 4096, 1000)
        assert read.check_bytes_done() == 1 << 19
        assert read.report()["total_bytes"] == 1 << 19
    got = cp.asnumpy(dst)
    assert np.array_equal(got[1000:1000 + (1 << 19)], data[1 << 19:])
    assert not got[:1000].any()


def test_a_torch_cuda_tensor_through_cufile(torch_cuda, make_file):
    torch = torch_cuda
    path, data = make_file(1 << 20, seed=11)
    t = torch.empty(data.size, dtype=torch.uint8, device="cuda")
    with kvikio.CuFile(path) as f:
        assert f.pread(t, task_size=1 << 18).get() == data.size
        s = torch.cuda.Stream()
        u = torch.zeros(data.size, dtype=torch.uint8, device="cuda")
        assert f.raw_read_async(u, s).check_bytes_done() == data.size
    assert np.array_equal(t.cpu().numpy(), data) and np.array_equal(u.cpu().numpy(), data)
