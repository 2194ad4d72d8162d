// describe_memory, synchronize_stream and cuda_driver_error (bindings.hpp).
#include "bindings.hpp"

#include <cstdint>
#include <string>

#include "errors.hpp"
#include "ferry/memory.hpp"

namespace py = pybind11;

namespace ferry::python {

void register_cuda(py::module_& m) {
  m.def(
      "describe_memory",
      [](std::uintptr_t address) {
        MemoryInfo info = unwrap(describe_memory(reinterpret_cast<const void*>(address)));
        return py::make_tuple(info.kind, info.device, info.allocation_start, info.allocation_size);
      },
      py::arg("address"), "(kind, device, allocation start, allocation size) of a pointer, as CUDA knows it.");
  m.def(
      "synchronize_stream",
      [](std::uintptr_t stream, int device) {
        check(without_gil([&] { return synchronize_stream(reinterpret_cast<void*>(stream), device); }));
      },
      py::arg("stream"), py::arg("device"), "Waits for the work queued on a CUDA stream of the device.");
  m.def(
      "cuda_driver_error",
      []() -> py::object {
        Status status = cuda_driver_status();
        if (status.ok()) return py::none();
        return message_text(status.message());
      },
      "None where the CUDA driver can be used, else why not.");
}

}  // namespace ferry::python
