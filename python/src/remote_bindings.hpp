// ferry._ferry.RemoteObject: the private binding of ferry::remote that ferry/remote.py builds the public
// ferry.remote module on.
#pragma once

#include <pybind11/pybind11.h>

namespace ferry::python {

/// Adds RemoteObject, remote_options and remote_unavailable_reason to the extension module.
void register_remote(pybind11::module_& m);

}  // namespace ferry::python
