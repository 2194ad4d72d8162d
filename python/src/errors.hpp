// Ferry's Status values become Python exceptions here, and only here.
//
// The mapping itself (which code becomes FileNotFoundError, ferry.InvalidArgumentError, ...) lives in
// Python, in ferry/_errors.py, so that it is written once and tested from Python; this file hands it the
// Status fields. Every function here must be called with the GIL held.
#pragma once

#include <utility>

#include <pybind11/pybind11.h>

#include "ferry/status.hpp"

namespace ferry::python {

/// The Python exception object for a non-OK `status` (ferry._errors.status_error decides its type).
/// An exception raised while making it (a KeyboardInterrupt from a signal handler) propagates.
pybind11::object status_exception(const Status& status);

/// Raises the Python exception for a non-OK `status`, as a pybind11::error_already_set so pybind11 passes
/// it through unchanged.
[[noreturn]] void throw_status(const Status& status);

/// Owns `o`, a new reference from the C API, or raises the exception the call set when `o` is null.
pybind11::object steal_or_throw(PyObject* o);

/// `s` as a str for people to read (messages, notes, report tables): UTF-8, any byte that is not becomes
/// U+FFFD, so that a file name that is not UTF-8 never makes the text fail to decode.
pybind11::str message_text(const std::string& s);

/// Raises ferry.InvalidBufferError (a ValueError) with `message`.
[[noreturn]] void throw_invalid_buffer(const std::string& message);

/// Raises ValueError("I/O operation on closed file '<path>'"), as Python's own files do.
[[noreturn]] void throw_closed(const std::string& path);

inline void check(const Status& status) {
  if (!status.ok()) throw_status(status);
}

template <typename T>
T unwrap(Result<T>&& result) {
  if (!result.ok()) throw_status(result.status());
  return std::move(result).value();
}

/// Runs `call()` with the GIL released (a call that may block: other Python threads run meanwhile); its
/// result is made before the GIL is taken back, and is the caller's to unwrap or check with it held.
template <typename Call>
auto without_gil(Call&& call) {
  pybind11::gil_scoped_release release;
  return call();
}

}  // namespace ferry::python
