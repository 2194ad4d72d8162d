#include "buffers.hpp"

#include <string>

namespace py = pybind11;

namespace ferry::python {
namespace {

// The DLPack ABI (dlpack.h, versions 0.x and 1.x), declared here so the build needs no DLPack header.
// Field order and types follow the specification; only the parts Ferry reads are named.
struct DlDevice {
  std::int32_t device_type, device_id;
};
struct DlDataType {
  std::uint8_t code, bits;
  std::uint16_t lanes;
};
struct DlTensor {
  void* data;
  DlDevice device;
  std::int32_t ndim;
  DlDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null means compact row-major
  std::uint64_t byte_offset;
};
struct DlManagedTensor {  // capsule name "dltensor"
  DlTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DlManagedTensor*);
};
struct DlPackVersion {
  std::uint32_t major, minor;
};
struct DlManagedTensorVersioned {  // capsule name "dltensor_versioned" (DLPack >= 1.0)
  DlPackVersion version;
  void* manager_ctx;
  void (*deleter)(DlManagedTensorVersioned*);
  std::uint64_t flags;
  DlTensor dl_tensor;
};
constexpr std::uint64_t kDlFlagReadOnly = 1ull << 0;

// A shape or strides as Python writes a tuple: "(4, 4)", "(8,)".
template <typename T>
std::string join(const T* values, int n) {
  std::string out = "(";
  for (int i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + (n == 1 ? ",)" : ")");
}

// Fills address/nbytes/contiguous/layout_note/device from a DLPack tensor description.
void describe_tensor(const DlTensor& t, Buffer& b) {
  b.device_type = t.device.device_type;
  b.device_id = t.device.device_id;
  b.address = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset;
  std::uint64_t bits = static_cast<std::uint64_t>(t.dtype.bits) * (t.dtype.lanes == 0 ? 1 : t.dtype.lanes);
  std::uint64_t count = 1;
  for (std::int32_t i = 0; i < t.ndim; ++i) count *= static_cast<std::uint64_t>(t.shape[i] < 0 ? 0 : t.shape[i]);
  if (bits % 8 != 0) {
    b.contiguous = false;
    b.layout_note = "elements of " + std::to_string(bits) + " bits are not whole bytes";
    b.nbytes = count * bits / 8;
    return;
  }
  b.nbytes = count * (bits / 8);
  if (t.strides == nullptr || count == 0) return;
  // Compact row-major: the stride of each dimension is the product of the later extents; dimensions of
  // extent 1 may carry any stride.
  std::int64_t expected = 1;
  for (std::int32_t i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) {
      b.contiguous = false;
      b.layout_note = "strides " + join(t.strides, t.ndim) + " (in elements) for shape " + join(t.shape, t.ndim);
      return;
    }
    expected *= t.shape[i];
  }
}

}  // namespace

std::unique_ptr<Buffer> Buffer::from_buffer_protocol(py::handle obj) {
  std::unique_ptr<Buffer> b(new Buffer());
  if (PyObject_GetBuffer(obj.ptr(), &b->view_, PyBUF_STRIDES) != 0) throw py::error_already_set();
  b->release_ = [view = &b->view_] { PyBuffer_Release(view); };
  b->origin = "buffer protocol";
  b->address = reinterpret_cast<std::uintptr_t>(b->view_.buf);
  b->nbytes = static_cast<std::uint64_t>(b->view_.len);
  b->readonly = b->view_.readonly != 0;
  b->contiguous = PyBuffer_IsContiguous(&b->view_, 'A') != 0;
  if (!b->contiguous) {
    const int n = b->view_.ndim;
    b->layout_note = "strides " + join(b->view_.strides, n) + " (in bytes) for shape " + join(b->view_.shape, n);
  }
  return b;
}

std::unique_ptr<Buffer> Buffer::from_dlpack(py::handle capsule) {
  PyObject* cap = capsule.ptr();
  if (!PyCapsule_CheckExact(cap)) throw py::type_error("__dlpack__() did not return a PyCapsule");
  std::unique_ptr<Buffer> b(new Buffer());
  b->origin = "dlpack";
  auto consume = [&](auto* m, const char* used_name) {
    PyCapsule_SetName(cap, used_name);
    b->release_ = [m] {
      if (m->deleter) m->deleter(m);
    };
    describe_tensor(m->dl_tensor, *b);
    return std::move(b);
  };
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    auto* m = static_cast<DlManagedTensorVersioned*>(PyCapsule_GetPointer(cap, "dltensor_versioned"));
    if (m->version.major != 1) {
      // The specification: a consumer that does not know the major version must not read the tensor.
      std::string v = std::to_string(m->version.major) + "." + std::to_string(m->version.minor);
      throw py::value_error("DLPack " + v + " tensors are not supported (Ferry reads DLPack 1.x)");
    }
    b->readonly = (m->flags & kDlFlagReadOnly) != 0;
    return consume(m, "used_dltensor_versioned");
  }
  if (PyCapsule_IsValid(cap, "dltensor")) {
    return consume(static_cast<DlManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor")), "used_dltensor");
  }
  const char* name = PyCapsule_GetName(cap);
  PyErr_Clear();
  throw py::value_error(std::string("not an unused DLPack capsule (its name is \"") + (name ? name : "") +
                        "\"; a capsule can be consumed once)");
}

std::unique_ptr<Buffer> Buffer::from_pointer(std::uintptr_t address, std::uint64_t nbytes, bool readonly,
                                             int device_type, int device_id, py::object owner,
                                             std::string origin) {
  std::unique_ptr<Buffer> b(new Buffer());
  b->origin = std::move(origin);
  b->address = address;
  b->nbytes = nbytes;
  b->readonly = readonly;
  b->device_type = device_type;
  b->device_id = device_id;
  b->owner_ = std::move(owner);
  return b;
}

}  // namespace ferry::python
