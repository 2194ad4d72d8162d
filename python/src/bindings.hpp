// The parts of ferry._ferry that module.cpp adds from files of their own, and what the binding files share.
#pragma once

#include <pybind11/pybind11.h>

namespace ferry::python {

/// [row(item) for item in items]: for collections whose Python form is not what pybind11's casters would
/// make (paths as bytes, structs as tuples, text for people).
template <typename Items, typename Row>
pybind11::list list_of(const Items& items, Row&& row) {
  pybind11::list out;
  for (const auto& item : items) out.append(row(item));
  return out;
}

/// SafetensorsCheckpoint and friends: the private binding of ferry::safetensors that ferry/safetensors.py
/// builds the public ferry.safetensors module on.
void register_safetensors(pybind11::module_& m);

/// safetensors_save and friends, and the SafetensorsSaveHandle class: the private binding of
/// ferry::safetensors' saving, which ferry/_save.py builds save_file and save_sharded on.
void register_safetensors_save(pybind11::module_& m);

}  // namespace ferry::python
