#include "errors.hpp"

#include <cstring>
#include <string>

namespace py = pybind11;

namespace ferry::python {
namespace {

// The message Python shows: Status::to_string() without its "code: " prefix, so it keeps the C++ text
// and the errno's name ("Could not read ... from \"/d/x.bin\": Input/output error (EIO)"); the code is an
// attribute of the exception instead.
std::string python_message(const Status& status) {
  return status.to_string().substr(std::strlen(error_code_name(status.code())) + 2);
}

// Paths are bytes on Linux: decode them as os.fsdecode() does, so odd names round-trip; messages are for
// people and must never fail to decode.
py::object fs_path(const std::string& path) {
  return steal_or_throw(PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size())));
}

[[noreturn]] void raise_object(py::object exc) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

}  // namespace

py::object steal_or_throw(PyObject* o) {
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

py::str message_text(const std::string& s) {
  return py::reinterpret_borrow<py::str>(
      steal_or_throw(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace")));
}

// An attribute of ferry._errors, or None when that module cannot be imported (only when _ferry is
// imported outside its package). Any other failure, such as a KeyboardInterrupt raised by a signal
// handler while the import ran, propagates as it is.
py::object errors_attr(const char* name) {
  try {
    return py::module_::import("ferry._errors").attr(name);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ImportError)) throw;
    return py::none();
  }
}

py::object status_exception(const Status& status) {
  py::object make = errors_attr("status_error");
  if (make.is_none()) {
    // Still say what failed, as an OSError: the mapping is not available.
    return steal_or_throw(PyObject_CallFunction(PyExc_OSError, "is", status.sys_errno(), status.to_string().c_str()));
  }
  return make(error_code_name(status.code()), message_text(python_message(status)), status.sys_errno(),
              status.path().empty() ? py::object(py::none()) : fs_path(status.path()));
}

void throw_status(const Status& status) {
  raise_object(status_exception(status));
}

void throw_invalid_buffer(const std::string& message) {
  py::object cls = errors_attr("InvalidBufferError");
  if (cls.is_none()) throw py::value_error(message);
  raise_object(cls(message_text(message)));
}

void throw_closed(const std::string& path) {
  PyErr_Format(PyExc_ValueError, "I/O operation on closed file %R", fs_path(path).ptr());
  throw py::error_already_set();
}

}  // namespace ferry::python
