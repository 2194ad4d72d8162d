// The parts of ferry._ferry that module.cpp adds from files of their own, and what the binding files share.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <utility>

#include <pybind11/pybind11.h>

#include "errors.hpp"

namespace ferry::python {

/// [row(item) for item in items]: for collections whose Python form is not what pybind11's casters would
/// make (paths as bytes, structs as tuples, text for people).
template <typename Items, typename Row>
pybind11::list list_of(const Items& items, Row&& row) {
  pybind11::list out;
  for (const auto& item : items) out.append(row(item));
  return out;
}

/// Runs `call()` without the GIL, for the safetensors loads and saves, with `options.progress` calling
/// `progress(done, total)` (a Python callable or None) at most every `interval_s` seconds; returns call()'s value
/// unwrapped. A callback that raises or returns False, or a pending KeyboardInterrupt, stops the operation, and
/// the exception is raised once call() returned, with the GIL held. `options` is the one `call` passes on; its
/// callback is not to be used after this returns.
template <typename Options, typename Call>
auto with_progress(pybind11::object progress, double interval_s, Options& options, Call&& call) {
  std::exception_ptr error;
  // Called without the GIL (it takes it): false stops the operation.
  options.progress = [&progress, &error](std::uint64_t done, std::uint64_t total) {
    pybind11::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
      return progress.is_none() || !progress(done, total).is(pybind11::bool_(false));
    } catch (...) {
      error = std::current_exception();
      return false;
    }
  };
  options.progress_interval = std::chrono::milliseconds(static_cast<long long>(interval_s * 1000.0));
  auto r = without_gil(call);
  if (error) std::rethrow_exception(error);
  return unwrap(std::move(r));
}

/// SafetensorsCheckpoint and friends: the private binding of ferry::safetensors that ferry/safetensors.py
/// builds the public ferry.safetensors module on.
void register_safetensors(pybind11::module_& m);

/// safetensors_save and friends, and the SafetensorsSaveHandle class: the private binding of
/// ferry::safetensors' saving, which ferry/_save.py builds save_file and save_sharded on.
void register_safetensors_save(pybind11::module_& m);

}  // namespace ferry::python
