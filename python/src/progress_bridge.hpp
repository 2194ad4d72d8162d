// ProgressBridge: a C++ progress callback (done, total) that calls a Python one and notices Ctrl-C, for the
// safetensors loads and saves. A callback that raises, returns False, or a pending KeyboardInterrupt stops
// the operation; the exception is raised once the operation returned (rethrow, with the GIL held).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <utility>

#include <pybind11/pybind11.h>

#include "errors.hpp"

namespace ferry::python {

class ProgressBridge {
 public:
  explicit ProgressBridge(pybind11::object callback) : callback_(std::move(callback)) {}

  /// Called without the GIL (it takes it): false stops the operation.
  bool operator()(std::uint64_t done, std::uint64_t total) {
    pybind11::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
      if (!callback_.is_none()) {
        pybind11::object answer = callback_(done, total);
        if (answer.is(pybind11::bool_(false))) return false;
      }
      return true;
    } catch (...) {
      error_ = std::current_exception();
      return false;
    }
  }

  /// With the GIL held: raises what the callback raised, if anything.
  void rethrow() {
    if (error_) {
      std::exception_ptr e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

 private:
  pybind11::object callback_;
  std::exception_ptr error_;
};

/// Runs `call()` without the GIL, with `options.progress` calling `progress` (a Python callable or None)
/// at most every `interval_s` seconds; raises what the callback raised, else returns call()'s value
/// unwrapped. `options` is the one `call` passes on; its callback is not to be used after this returns.
template <typename Options, typename Call>
auto with_progress(pybind11::object progress, double interval_s, Options& options, Call&& call) {
  ProgressBridge bridge(std::move(progress));
  options.progress = [&bridge](std::uint64_t done, std::uint64_t total) { return bridge(done, total); };
  options.progress_interval = std::chrono::milliseconds(static_cast<long long>(interval_s * 1000.0));
  auto r = without_gil(call);
  bridge.rethrow();
  return unwrap(std::move(r));
}

}  // namespace ferry::python
