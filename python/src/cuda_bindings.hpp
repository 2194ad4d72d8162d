// ferry._ferry.describe_memory, synchronize_stream and cuda_driver_error: the CUDA checks ferry/_buffers.py
// makes before it hands a producer's pointer to C++ (through Ferry's own driver table, never ctypes).
#pragma once

#include <pybind11/pybind11.h>

namespace ferry::python {

/// Adds the CUDA functions to the extension module.
void register_cuda(pybind11::module_& m);

}  // namespace ferry::python
