// ferry._ferry.SafetensorsCheckpoint and friends: the private binding of ferry::safetensors that
// ferry/safetensors.py builds the public ferry.safetensors module on.
#pragma once

#include <pybind11/pybind11.h>

namespace ferry::python {

/// Adds the safetensors classes to the extension module.
void register_safetensors(pybind11::module_& m);

}  // namespace ferry::python
