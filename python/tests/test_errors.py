"""Errors: C++ statuses as Python exceptions, and bad buffers refused before any I/O."""

from __future__ import annotations

import errno
import os
from pathlib import Path
import sys
import subprocess

import numpy as np
import pytest

import ferry
from ferry import _ferry


def test_missing_file_is_file_not_found_error_with_errno_and_filename(tmp_path):
    missing = tmp_path / "missing.bin"
    with pytest.raises(FileNotFoundError) as info:
        ferry.open(missing)
    e = info.value
    assert e.errno == errno.ENOENT
    assert e.filename == str(missing)
    assert e.code == "not_found"
    assert str(missing) in str(e) and "ENOENT" in str(e)


def test_directory_is_is_a_directory_error(tmp_path):
    with pytest.raises(IsADirectoryError) as info:
        ferry.open(tmp_path)
    assert info.value.errno == errno.EISDIR
    assert info.value.filename == str(tmp_path)


_UNREADABLE_CHILD = r"""
import errno, os, sys
if os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)  # root reads anything: check as nobody, as a user would meet it
import ferry
try:
    ferry.open(sys.argv[1])
except PermissionError as e:
    assert e.errno == errno.EACCES, e.errno
    assert e.filename == sys.argv[1], e.filename
    print("PermissionError", e)
    sys.exit(0)
print("no PermissionError")
sys.exit(1)
"""


def test_unreadable_file_is_permission_error(make_file):
    path, _ = make_file(10)
    path.chmod(0)
    # The directories above must let the unprivileged child reach the file.
    for parent in path.parents:
        if parent == Path(parent.anchor):
            break
        parent.chmod(parent.stat().st_mode | 0o011)
    try:
        env = dict(os.environ, PYTHONPATH=str(Path(ferry.__file__).resolve().parents[1]))
        out = subprocess.run([sys.executable, "-c", _UNREADABLE_CHILD, str(path)], capture_output=True,
                             text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "PermissionError" in out.stdout
    finally:
        path.chmod(0o644)


def test_missing_directory_for_write_is_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        ferry.open(tmp_path / "no" / "such" / "dir.bin", "w")


def test_bad_mode_is_invalid_argument_error_and_value_error(make_file):
    path, _ = make_file(10)
    with pytest.raises(ferry.InvalidArgumentError, match="open mode") as info:
        ferry.open(path, "x")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ferry.FerryError)
    assert info.value.code == "invalid_argument"


def test_bad_setting_value_on_open(make_file):
    path, _ = make_file(10)
    with pytest.raises(ValueError, match="task_size"):
        ferry.open(path, task_size="lots")
    with pytest.raises(TypeError, match="unknown setting"):
        ferry.open(path, no_such_setting=1)


def test_write_to_a_read_only_file_is_ferry_error(make_file):
    path, _ = make_file(10)
    with ferry.open(path) as f:
        with pytest.raises(ferry.FerryError) as info:
            f.write(b"abc")
    assert info.value.code == "failed_precondition"
    assert info.value.errno == errno.EBADF
    assert info.value.filename == str(path)
    assert "opened for reading only" in str(info.value)


def test_read_from_a_write_only_file_is_ferry_error(tmp_path):
    with ferry.open(tmp_path / "w.bin", "w") as f:
        with pytest.raises(ferry.FerryError, match="writing only"):
            f.read(10)


# ---- buffers: every refusal happens before I/O, so the file and the reports stay untouched


def _no_io_happened(f: ferry.File) -> bool:
    return f.report()["total_ops"] == 0


def test_read_into_read_only_buffers(make_file):
    path, _ = make_file(100)
    ro = np.zeros(100, dtype=np.uint8)
    ro.flags.writeable = False
    with ferry.open(path) as f:
        for buf in (b"x" * 100, memoryview(bytearray(100)).toreadonly(), ro):
            with pytest.raises(ferry.InvalidBufferError, match="read-only"):
                f.pread(buf)
            with pytest.raises(ValueError, match="read-only"):
                f.read(buf)
        assert _no_io_happened(f)


def test_writing_from_read_only_buffers_is_fine(tmp_path):
    ro = np.arange(10, dtype=np.uint8)
    ro.flags.writeable = False
    with ferry.open(tmp_path / "ro.bin", "w") as f:
        assert f.write(b"abc") == 3
        assert f.write(ro) == 10


def test_buffer_too_small(make_file):
    path, _ = make_file(100)
    with ferry.open(path, "r+") as f:
        with pytest.raises(ferry.InvalidBufferError, match="too small: 11 bytes requested, the buffer holds 10"):
            f.pread(bytearray(10), size=11)
        with pytest.raises(ferry.InvalidBufferError, match="too small"):
            f.pwrite(b"abc", size=4)
        with pytest.raises(ferry.InvalidBufferError, match="too small"):
            f.read(bytearray(1), 2)
        assert _no_io_happened(f)


def test_non_contiguous_buffers(make_file):
    path, _ = make_file(1000)
    strided = np.zeros(200, dtype=np.uint8)[::2]
    with ferry.open(path, "r+") as f:
        with pytest.raises(ferry.InvalidBufferError, match="not contiguous.*ascontiguousarray"):
            f.pread(strided)
        with pytest.raises(ferry.InvalidBufferError, match="not contiguous"):
            f.pwrite(np.zeros((10, 10))[:, :3])
        assert _no_io_happened(f)


def test_objects_that_are_not_buffers(make_file):
    path, _ = make_file(100)
    with ferry.open(path, "r+") as f:
        for obj in ("text", 1.5, object(), [1, 2, 3], None):
            with pytest.raises(TypeError):
                f.pread(obj)
            with pytest.raises(TypeError):
                f.pwrite(obj)
        assert _no_io_happened(f)


def test_negative_offset_and_size(make_file):
    path, _ = make_file(100)
    with ferry.open(path) as f:
        with pytest.raises(ValueError, match="offset"):
            f.pread(bytearray(10), offset=-1)
        with pytest.raises(ValueError, match="size"):
            f.pread(bytearray(10), size=-5)


class _FakeDLPack:
    """A DLPack producer on a device Ferry cannot reach; it must be refused before __dlpack__ is called."""

    def __init__(self, device_type: int) -> None:
        self.device_type = device_type
        self.exported = False

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None, max_version=None):
        self.exported = True
        raise AssertionError("must not be exported")


@pytest.mark.parametrize("device_type,name", [(10, "ROCm"), (8, "Metal"), (14, "oneAPI"), (99, "device type 99")])
def test_unsupported_dlpack_device_types(make_file, device_type, name):
    path, _ = make_file(100)
    fake = _FakeDLPack(device_type)
    with ferry.open(path) as f:
        with pytest.raises(ferry.InvalidBufferError, match=f"{name}.*CPU and CUDA memory only"):
            f.pread(fake)
        assert _no_io_happened(f)
    assert not fake.exported


class _FakeCudaArray:
    """A CUDA Array Interface whose pointer no CUDA context knows (or no CUDA driver at all)."""

    def __init__(self, strides=None) -> None:
        self.__cuda_array_interface__ = {
            "shape": (64,), "typestr": "|u1", "data": (0xDEAD0000, False), "version": 3, "strides": strides,
            "stream": None,
        }


def test_cuda_array_interface_with_an_unknown_pointer_is_refused(make_file):
    path, _ = make_file(100)
    with ferry.open(path) as f:
        with pytest.raises(ferry.InvalidBufferError, match="CUDA"):
            f.pread(_FakeCudaArray())
        assert _no_io_happened(f)


def test_cuda_array_interface_strided_is_refused(make_file):
    path, _ = make_file(100)
    with ferry.open(path) as f:
        with pytest.raises(ferry.InvalidBufferError, match="not contiguous"):
            f.pread(_FakeCudaArray(strides=(2,)))


def test_dlpack_cpu_producer_without_buffer_protocol(make_file):
    # NumPy arrays are DLPack producers too; hide the buffer protocol to force the DLPack path.
    if not hasattr(np.ndarray, "__dlpack__"):
        pytest.skip("this NumPy has no __dlpack__")
    path, data = make_file(4096)

    class OnlyDLPack:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    out = np.zeros(1024, dtype=np.int32)
    with ferry.open(path) as f:
        assert f.pread(OnlyDLPack(out)).result() == 4096
    assert out.tobytes() == data.tobytes()


def test_a_dlpack_capsule_is_consumed_once():
    if not hasattr(np.ndarray, "__dlpack__"):
        pytest.skip("this NumPy has no __dlpack__")
    capsule = np.zeros(4, dtype=np.uint8).__dlpack__()
    buf = _ferry.Buffer.from_dlpack(capsule)
    assert buf.nbytes == 4 and buf.device_type == 1
    with pytest.raises(ValueError, match="consumed once"):
        _ferry.Buffer.from_dlpack(capsule)


# ---- the mapping itself, code by code


@pytest.mark.parametrize(
    "code,eno,cls",
    [
        ("not_found", 0, FileNotFoundError),
        ("not_found", errno.ENOENT, FileNotFoundError),
        ("permission_denied", errno.EPERM, PermissionError),
        ("permission_denied", 0, PermissionError),
        ("is_a_directory", 0, IsADirectoryError),
        ("already_exists", 0, FileExistsError),
        ("io_error", errno.EIO, OSError),
        ("no_space", errno.ENOSPC, OSError),
        ("io_error", 0, ferry.FerryError),
        ("out_of_range", 0, ferry.FerryError),
        ("invalid_argument", 0, ferry.InvalidArgumentError),
        ("invalid_argument", errno.EINVAL, ferry.InvalidArgumentError),
        ("unavailable", 0, ferry.UnavailableError),
        ("failed_precondition", errno.EBADF, ferry.FerryError),
        ("cancelled", 0, ferry.CancelledError),
        ("internal", 0, ferry.FerryError),
    ],
)
def test_status_mapping(code, eno, cls):
    with pytest.raises(cls) as info:
        _ferry._raise_status(code, "Could not do it to \"/d/x.bin\"", eno, "/d/x.bin")
    e = info.value
    assert type(e) is cls or cls is OSError
    assert e.code == code
    assert e.filename == "/d/x.bin"
    assert "Could not do it" in str(e)
    assert "[Errno None]" not in str(e)
    if eno:
        assert e.errno == eno
        assert os.strerror(eno) in str(e)


def test_every_cpp_error_code_maps():
    for code in _ferry.error_code_names():
        if code == "ok":
            continue
        with pytest.raises(OSError) as info:
            _ferry._raise_status(code, "message", 0, "")
        assert info.value.code == code
        assert str(info.value) == "message" or "message" in str(info.value)


def test_exception_names_are_public():
    assert ferry.FerryError.__module__ == "ferry"
    assert issubclass(ferry.InvalidBufferError, ValueError)
    assert issubclass(ferry.FerryError, OSError)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_while_an_error_is_mapped_is_not_turned_into_runtime_error(make_file, monkeypatch, interrupt):
    # A signal handler may raise while the extension builds an exception (it runs Python code for that):
    # the interrupt must come out as it is, not as RuntimeError, and not be swallowed.
    from ferry import _errors

    def interrupted(*args):
        raise interrupt()

    path, _ = make_file(10)
    with ferry.open(path) as f:
        monkeypatch.setattr(_errors, "status_error", interrupted)
        with pytest.raises(interrupt):
            _ferry._raise_status("io_error", "message", errno.EIO, "/d/x.bin")
        with pytest.raises(interrupt):
            f.pwrite(b"abc").result()  # opened "r": the request fails, and its error is being mapped
        monkeypatch.setattr(_errors, "InvalidBufferError", interrupted)
        with pytest.raises(interrupt):
            f._impl.pread(_ferry.Buffer.from_buffer_protocol(bytearray(1)), 10, 0)  # buffer too small


def test_no_ferry_call_raises_runtime_error_for_an_eintr_or_a_closed_file(tmp_path):
    # Before: a FIFO open blocked until Ctrl-C, which surfaced as RuntimeError (EINTR). Every failure of
    # the C++ side is an OSError subclass now, and a closed file a ValueError.
    path = tmp_path / "x.bin"
    path.write_bytes(b"abc")
    f = ferry.open(path)
    f.close()
    for call in (lambda: f.read(1), lambda: f.pread(bytearray(1)), f.size, f.sync, lambda: f.write(b"x")):
        with pytest.raises(ValueError):
            call()
    with pytest.raises(OSError):
        ferry.open(tmp_path / "missing")
