"""The few CUDA driver calls the Python layer makes itself, through ctypes (never linked, never required).

Ferry's C++ side classifies and moves device memory on its own. Python needs the driver for two checks
before handing a device pointer to C++: that the pointer really is memory CUDA knows (a wrong pointer
would otherwise be treated as host memory), and which device it is on; and to honour a producer's
stream (the CUDA Array Interface's ``stream``, DLPack's ``stream`` argument): the producer's pending work
on it must finish before Ferry reads or writes the memory.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Dict, Optional, Tuple

__all__ = ["CudaError", "driver_error", "stream_synchronize", "pointer_info", "allocation_range"]

# Values from cuda.h (CUpointer_attribute, CUmemorytype).
_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
_CU_POINTER_ATTRIBUTE_IS_MANAGED = 8
_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11
_CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12
_CU_MEMORYTYPE_HOST = 1
_CU_MEMORYTYPE_DEVICE = 2
_CU_MEMORYTYPE_UNIFIED = 4

_lock = threading.Lock()
_primary_contexts: Dict[int, ctypes.c_void_p] = {}  # device ordinal -> retained primary context (kept for the process's life)
_driver: Optional[ctypes.CDLL] = None
_driver_error: Optional[str] = None
_loaded = False


class CudaError(RuntimeError):
    """A CUDA driver call made by the Python layer failed."""


def _load() -> Optional[ctypes.CDLL]:
    global _driver, _driver_error, _loaded
    with _lock:
        if not _loaded:
            _loaded = True
            try:
                lib = ctypes.CDLL("libcuda.so.1")
                lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
                lib.cuPointerGetAttribute.restype = ctypes.c_int
                lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
                lib.cuStreamSynchronize.restype = ctypes.c_int
                lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
                lib.cuGetErrorName.restype = ctypes.c_int
                lib.cuInit.argtypes = [ctypes.c_uint]
                lib.cuInit.restype = ctypes.c_int
                lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
                lib.cuDeviceGet.restype = ctypes.c_int
                lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
                lib.cuDevicePrimaryCtxRetain.restype = ctypes.c_int
                lib.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
                lib.cuCtxPushCurrent_v2.restype = ctypes.c_int
                lib.cuCtxPopCurrent_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
                lib.cuCtxPopCurrent_v2.restype = ctypes.c_int
                _driver = lib
            except (OSError, AttributeError) as e:
                _driver_error = f"the CUDA driver (libcuda.so.1) could not be loaded: {e}"
        return _driver


def driver_error() -> Optional[str]:
    """None when the CUDA driver loads, else why not."""
    _load()
    return _driver_error


def _name(lib: ctypes.CDLL, rc: int) -> str:
    out = ctypes.c_char_p()
    if lib.cuGetErrorName(rc, ctypes.byref(out)) == 0 and out.value:
        return f"{out.value.decode()} ({rc})"
    return f"CUresult {rc}"


def _primary_context(lib: ctypes.CDLL, device: int) -> ctypes.c_void_p:
    """The primary context of ``device`` (the one CuPy, PyTorch and Ferry use), retained once."""
    with _lock:
        ctx = _primary_contexts.get(device)
        if ctx is not None:
            return ctx
        rc = lib.cuInit(0)
        if rc != 0:
            raise CudaError(f"cuInit failed: {_name(lib, rc)}")
        handle = ctypes.c_int(0)
        rc = lib.cuDeviceGet(ctypes.byref(handle), device)
        if rc != 0:
            raise CudaError(f"cuDeviceGet({device}) failed: {_name(lib, rc)}")
        ctx = ctypes.c_void_p()
        rc = lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), handle.value)
        if rc != 0:
            raise CudaError(f"cuDevicePrimaryCtxRetain({device}) failed: {_name(lib, rc)}")
        _primary_contexts[device] = ctx
        return ctx


def stream_synchronize(stream: int, device: int) -> None:
    """Waits for the work queued on a CUDA stream handle (1 = legacy default, 2 = per-thread default) of
    ``device``'s primary context. The calling thread may have no current context at all (a fresh
    ``threading.Thread``): the context is pushed for the call and popped after, so the caller's current
    context is left as it was."""
    lib = _load()
    if lib is None:
        raise CudaError(_driver_error or "CUDA driver missing")
    ctx = _primary_context(lib, max(device, 0))
    rc = lib.cuCtxPushCurrent_v2(ctx)
    if rc != 0:
        raise CudaError(f"cuCtxPushCurrent for device {device} failed: {_name(lib, rc)}")
    try:
        rc = lib.cuStreamSynchronize(ctypes.c_void_p(stream))
    finally:
        popped = ctypes.c_void_p()
        lib.cuCtxPopCurrent_v2(ctypes.byref(popped))
    if rc != 0:
        raise CudaError(f"cuStreamSynchronize(stream {stream:#x}) on device {device} failed: {_name(lib, rc)}")


def _attribute(lib: ctypes.CDLL, value: Any, attribute: int, name: str, address: int) -> int:
    """One cuPointerGetAttribute, or CudaError naming the attribute, the pointer and the driver's error."""
    rc = lib.cuPointerGetAttribute(ctypes.byref(value), attribute, address)
    if rc != 0:
        raise CudaError(f"cuPointerGetAttribute({name}, {address:#x}) failed: {_name(lib, rc)}")
    return int(value.value)


def allocation_range(address: int) -> Tuple[int, int]:
    """(start, size) of the CUDA allocation holding ``address``, as the driver records it."""
    lib = _load()
    if lib is None:
        raise CudaError(_driver_error or "CUDA driver missing")
    start = _attribute(lib, ctypes.c_uint64(0), _CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, "RANGE_START_ADDR", address)
    size = _attribute(lib, ctypes.c_size_t(0), _CU_POINTER_ATTRIBUTE_RANGE_SIZE, "RANGE_SIZE", address)
    return start, size


def pointer_info(address: int) -> Tuple[str, int]:
    """What CUDA knows about ``address``: (kind, device ordinal), kind one of "device", "managed",
    "host-pinned". Raises CudaError (with the driver's error name) when CUDA does not know the pointer or
    the driver cannot be used."""
    lib = _load()
    if lib is None:
        raise CudaError(_driver_error or "CUDA driver missing")
    memtype = _attribute(lib, ctypes.c_uint(0), _CU_POINTER_ATTRIBUTE_MEMORY_TYPE, "MEMORY_TYPE", address)
    managed = ctypes.c_int(0)
    if lib.cuPointerGetAttribute(ctypes.byref(managed), _CU_POINTER_ATTRIBUTE_IS_MANAGED, address) != 0:
        managed.value = 0
    ordinal = ctypes.c_int(-1)
    if lib.cuPointerGetAttribute(ctypes.byref(ordinal), _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address) != 0:
        ordinal.value = -1
    if managed.value or memtype == _CU_MEMORYTYPE_UNIFIED:
        return "managed", ordinal.value
    if memtype == _CU_MEMORYTYPE_DEVICE:
        return "device", ordinal.value
    if memtype == _CU_MEMORYTYPE_HOST:
        return "host-pinned", ordinal.value
    return f"memory type {memtype}", ordinal.value
