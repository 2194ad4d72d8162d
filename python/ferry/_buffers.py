"""From any Python buffer to memory Ferry can use: the CUDA Array Interface, DLPack, the buffer protocol.

Order of preference: ``__cuda_array_interface__`` (CuPy, Numba, PyTorch CUDA tensors), then the buffer
protocol (NumPy, bytes, bytearray, memoryview, mmap), then DLPack (``__dlpack__``/``__dlpack_device__``:
PyTorch CPU tensors, JAX, any array-API library). Every check that can fail does so here, before any I/O:
a read-only destination, a strided layout, a device type Ferry cannot reach (ROCm, Metal, ...), a pointer
CUDA does not know, a producer's device that does not match the pointer's.

Streams: a producer that names a stream (CAI version 3's ``stream``; DLPack's ``stream`` argument, for
which Ferry passes the legacy default stream) may still have work pending on the memory. Ferry's own
copies are not ordered after that work, so the Python layer waits for the stream before starting the I/O.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ._errors import InvalidBufferError
from ._ferry import Buffer, describe_memory, synchronize_stream

__all__ = ["acquire"]

# DLPack device types (dlpack.h DLDeviceType) and what Ferry makes of them.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_NAMES = {
    1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm",
    11: "ROCm host", 12: "ext_dev", 13: "CUDA managed", 14: "oneAPI", 15: "WebGPU", 16: "Hexagon", 17: "MAIA",
}
_SUPPORTED_DL = (_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED)
_LEGACY_DEFAULT_STREAM = 1


def _what(obj: Any) -> str:
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _check_device_pointer(obj: Any, address: int, claimed_device: int, nbytes: int) -> Tuple[int, int]:
    """(DLPack device type, ordinal) of a pointer a producer says is CUDA memory, checked with the driver."""
    if nbytes == 0:
        return _DL_CUDA, max(claimed_device, 0)
    try:
        kind, ordinal, start, size = describe_memory(address)
    except OSError as e:  # no usable driver, or the driver's own failure (a ferry.FerryError)
        raise InvalidBufferError(
            f"{_what(obj)} says its memory at {address:#x} is CUDA memory, but CUDA does not know it: {e}"
        ) from None
    if kind == "host-pageable":
        raise InvalidBufferError(
            f"{_what(obj)} says its memory at {address:#x} is CUDA memory, but CUDA does not know it (the "
            "driver has never seen that address)"
        )
    if claimed_device >= 0 and ordinal >= 0 and ordinal != claimed_device:
        raise InvalidBufferError(
            f"{_what(obj)} says it lives on cuda:{claimed_device}, but its pointer {address:#x} is on cuda:{ordinal}"
        )
    dl = {"device": _DL_CUDA, "managed": _DL_CUDA_MANAGED, "host-pinned": _DL_CUDA_HOST}.get(kind)
    if dl is None:
        raise InvalidBufferError(f"{_what(obj)}: CUDA reports {kind} for {address:#x}, which Ferry cannot use")
    # The size a producer claims is not proof: the whole range must lie in one live allocation.
    if kind in ("device", "managed") and size and (address < start or address + nbytes > start + size):
        usable = max(0, start + size - address)
        raise InvalidBufferError(
            f"{_what(obj)} says it holds {nbytes} bytes at {address:#x} on cuda:{ordinal}, but the driver says "
            f"the allocation holding that address is {size} bytes at {start:#x}: only {usable} bytes from the "
            "pointer are usable"
        )
    return dl, ordinal


def _sync(obj: Any, stream: int, device: int) -> None:
    try:
        synchronize_stream(stream, device)
    except OSError as e:
        raise InvalidBufferError(f"could not wait for the stream {_what(obj)} named: {e}") from None


def _from_cuda_array_interface(obj: Any, cai: Any, ordered: bool = False) -> Buffer:
    try:
        address, readonly = cai["data"]
        shape = tuple(int(n) for n in cai["shape"])
        typestr = str(cai["typestr"])
        itemsize = int(typestr[2:])
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidBufferError(f"{_what(obj)} has a malformed __cuda_array_interface__: {e!r}") from None
    if cai.get("mask") is not None:
        raise InvalidBufferError(f"{_what(obj)} is a masked array; Ferry needs plain contiguous memory")
    count = 1
    for n in shape:
        count *= n
    nbytes = count * itemsize
    strides = cai.get("strides")
    if strides is not None and count > 0:
        expected = itemsize
        for n, s in zip(reversed(shape), reversed(tuple(strides))):
            if n != 1 and s != expected:
                raise InvalidBufferError(
                    f"{_what(obj)} is not contiguous (strides {tuple(strides)} in bytes for shape {shape}); "
                    "pass a C-contiguous array (cupy.ascontiguousarray, tensor.contiguous())"
                )
            expected *= n
    address = int(address or 0)
    dl_type, ordinal = _check_device_pointer(obj, address, -1, nbytes)
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    if stream is not None and not ordered:
        if int(stream) == 0:
            raise InvalidBufferError(f"{_what(obj)} names stream 0, which the CUDA Array Interface forbids")
        _sync(obj, int(stream), ordinal)
    return Buffer.from_pointer(address, nbytes, bool(readonly), dl_type, ordinal, obj, "cuda array interface")


def _is_torch_cpu_tensor(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and getattr(getattr(obj, "device", None), "type", None) == "cpu"


def _from_torch_cpu(obj: Any) -> Buffer:
    """A PyTorch CPU tensor's memory, from the tensor itself. Its DLPack export asks CUDA whether the tensor
    is pinned (Tensor.is_pinned), and that fails in a process forked after CUDA started there: a DataLoader
    worker's read into a CPU tensor failed so on the GPU machine."""
    if obj.requires_grad:
        raise InvalidBufferError(f"cannot use a {_what(obj)} that requires grad; pass tensor.detach()")
    if str(obj.layout) != "torch.strided" or obj.is_conj() or obj.is_neg():
        raise InvalidBufferError(
            f"{_what(obj)} is not a plain strided tensor (layout {obj.layout}, conjugate {obj.is_conj()}, "
            f"negative {obj.is_neg()}); pass tensor.resolve_conj().resolve_neg() or a dense tensor"
        )
    if not obj.is_contiguous():
        raise InvalidBufferError(
            f"{_what(obj)} is not contiguous (strides {tuple(obj.stride())} in elements for shape "
            f"{tuple(obj.shape)}); pass a contiguous tensor (tensor.contiguous())"
        )
    nbytes = obj.numel() * obj.element_size()
    return Buffer.from_pointer(int(obj.data_ptr()), nbytes, False, _DL_CPU, 0, obj, "pytorch cpu tensor")


def _from_dlpack(obj: Any, consumer_stream: Optional[int] = None) -> Buffer:
    try:
        dev_type, dev_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (_DL_CPU, 0)
        dev_type, dev_id = int(dev_type), int(dev_id)
    except Exception as e:  # a producer's own failure: say whose
        raise InvalidBufferError(f"{_what(obj)}.__dlpack_device__() failed: {e}") from e
    if dev_type not in _SUPPORTED_DL:
        name = _DL_NAMES.get(dev_type, f"device type {dev_type}")
        raise InvalidBufferError(
            f"{_what(obj)} lives on a {name} device ({name.lower()}:{dev_id}); Ferry reads into and writes "
            "from CPU and CUDA memory only"
        )
    # DLPack's `stream` is the consumer's stream, on which the producer makes its data ready: the stream of
    # a stream-ordered request, else the legacy default stream, which Ferry then waits for.
    wanted = _LEGACY_DEFAULT_STREAM if consumer_stream is None else consumer_stream
    kwargs: Dict[str, Any] = {"stream": wanted} if dev_type in (_DL_CUDA, _DL_CUDA_MANAGED) else {}
    capsule = None
    # Ask for a DLPack 1.x capsule (it carries the read-only flag); older producers take fewer arguments.
    for attempt in ({**kwargs, "max_version": (1, 0)}, kwargs, {}):
        try:
            capsule = obj.__dlpack__(**attempt)
            break
        except TypeError:
            continue
        except Exception as e:
            raise InvalidBufferError(f"{_what(obj)}.__dlpack__() failed: {e}") from e
    if capsule is None:
        raise InvalidBufferError(f"{_what(obj)}.__dlpack__() rejected every calling convention Ferry knows")
    try:
        buf = Buffer.from_dlpack(capsule)
    except (TypeError, ValueError) as e:
        raise InvalidBufferError(f"{_what(obj)}: {e}") from None
    if buf.device_type != dev_type:
        raise InvalidBufferError(
            f"{_what(obj)}: __dlpack_device__() says device type {dev_type}, its capsule says {buf.device_type}"
        )
    if dev_type in (_DL_CUDA, _DL_CUDA_MANAGED):
        _, ordinal = _check_device_pointer(obj, buf.address, dev_id, buf.nbytes)
        if "stream" in kwargs and consumer_stream is None:
            _sync(obj, _LEGACY_DEFAULT_STREAM, ordinal if ordinal >= 0 else dev_id)
    return buf


def acquire(obj: Any, *, for_read: bool, stream: Optional[int] = None) -> Buffer:
    """Pins ``obj``'s memory for one request. ``for_read``: Ferry will write into it (a file read).

    ``stream``: the CUDA stream of a stream-ordered request (read_async/write_async). The producer's own
    stream is then not waited for on the host: a DLPack producer is asked to make its data ready on
    ``stream``, and a CUDA Array Interface producer's stream is the caller's to order with ``stream``.

    Raises TypeError for objects that expose no memory at all, and InvalidBufferError (a ValueError) for
    memory Ferry cannot use.
    """
    if isinstance(obj, Buffer):
        buf = obj
    elif isinstance(obj, str):
        raise TypeError("a bytes-like object or an array is required, not 'str'")
    else:
        try:
            cai = getattr(obj, "__cuda_array_interface__", None)
        except Exception as e:  # PyTorch refuses tensors that require grad, for example
            raise InvalidBufferError(f"{_what(obj)}.__cuda_array_interface__ failed: {e}") from e
        if cai is not None:
            buf = _from_cuda_array_interface(obj, cai, ordered=stream is not None)
        elif _is_torch_cpu_tensor(obj):
            buf = _from_torch_cpu(obj)
        else:
            try:
                buf = Buffer.from_buffer_protocol(obj)
            except TypeError:
                if not hasattr(obj, "__dlpack__"):
                    raise TypeError(
                        f"{_what(obj)} is not a buffer: Ferry takes objects with __cuda_array_interface__, "
                        "__dlpack__ or the buffer protocol (NumPy, CuPy, PyTorch, bytearray, memoryview, ...)"
                    ) from None
                buf = _from_dlpack(obj, stream)
    if for_read and buf.readonly:
        raise InvalidBufferError(f"cannot read into a read-only {_what(obj)}")
    if not buf.contiguous:
        raise InvalidBufferError(
            f"{_what(obj)} is not contiguous ({buf.layout_note}); pass a contiguous array "
            "(numpy.ascontiguousarray, cupy.ascontiguousarray, tensor.contiguous())"
        )
    return buf
