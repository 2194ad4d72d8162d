// ferry._ferry.safetensors_save and friends: the private binding of ferry::safetensors' saving, which
// ferry/_save.py builds save_file and save_sharded on.
#pragma once

#include <pybind11/pybind11.h>

namespace ferry::python {

/// Adds the save functions and the SafetensorsSaveHandle class to the extension module.
void register_safetensors_save(pybind11::module_& m);

}  // namespace ferry::python
