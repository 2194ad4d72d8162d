// Python objects as memory Ferry can read into or write from.
//
// A Buffer pins the memory of one Python object for as long as the Buffer lives: a buffer-protocol view
// (NumPy, bytearray, memoryview, mmap), a consumed DLPack capsule (owned here until the Buffer dies, then
// handed back to its producer's deleter), or a plain pointer plus a reference to its owner (the CUDA Array
// Interface, parsed in Python). It records what Python-side checks need (read-only, contiguous, device)
// and does not judge: ferry/_buffers.py decides what is acceptable and raises the errors.
// Thread safety: a Buffer is created and destroyed with the GIL held; `address`/`nbytes` may be read
// without it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <pybind11/pybind11.h>

namespace ferry::python {

class Buffer {
 public:
  /// Takes a view of `obj` through the buffer protocol (PyBUF_STRIDES, so that read-only and strided
  /// exporters are accepted here and judged by the caller). Raises what PyObject_GetBuffer raised.
  static std::unique_ptr<Buffer> from_buffer_protocol(pybind11::handle obj);

  /// Consumes a DLPack capsule ("dltensor", or "dltensor_versioned" of DLPack 1.x) and renames it
  /// "used_..." as the protocol requires; the Buffer calls the tensor's deleter when it dies. Raises
  /// ValueError for a capsule that is not an unused DLPack tensor or has an unknown major version.
  static std::unique_ptr<Buffer> from_dlpack(pybind11::handle capsule);

  /// Memory described by the caller (the CUDA Array Interface, a PyTorch CPU tensor's own attributes), kept
  /// alive through `owner`; `origin` names the description.
  static std::unique_ptr<Buffer> from_pointer(std::uintptr_t address, std::uint64_t nbytes, bool readonly,
                                              int device_type, int device_id, pybind11::object owner,
                                              std::string origin);

  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (release_) release_();  // releases the view, or hands the DLPack tensor back to its deleter
  }

  std::uintptr_t address = 0;
  std::uint64_t nbytes = 0;
  bool readonly = false;
  bool contiguous = true;
  int device_type = 1;       // dlpack.h's DLDeviceType: kDLCPU (1), kDLCUDA (2), kDLCUDAHost (3), ...
  int device_id = 0;
  std::string origin;        // "buffer protocol", "dlpack", "cuda array interface"
  std::string layout_note;   // set when the layout cannot be used: "strides (8, 2) for shape (4, 4)", ...

 private:
  Buffer() = default;
  Py_buffer view_{};
  std::function<void()> release_;
  pybind11::object owner_;
};

}  // namespace ferry::python
