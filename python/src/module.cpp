// ferry._ferry: the private extension under the `ferry` package. It binds the public C++ API one to one
// (File, Future, Config, process reports) with the GIL released around every call that may block; the
// Python layer in ferry/__init__.py gives it its Pythonic shape (keyword arguments, buffers from any
// producer, dict reports, exceptions). Nothing here includes Ferry's internals.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "buffers.hpp"
#include "errors.hpp"
#include "safetensors_bindings.hpp"
#include "ferry/doctor.hpp"
#include "ferry/ferry.hpp"

namespace py = pybind11;

namespace ferry::python {
namespace {

// Reports cross into Python as (json, table): the JSON the C++ API and CLI print, parsed into a dict by
// ferry.Report, and the human table for its repr.
py::tuple report_parts(const Report& report) {
  return py::make_tuple(report.to_json(), report.table());
}

Buffer& checked_buffer(py::handle obj, std::uint64_t size, bool is_read) {
  Buffer& b = obj.cast<Buffer&>();
  if (size > b.nbytes) {
    throw_invalid_buffer("buffer too small: " + std::to_string(size) + " bytes requested, the buffer holds " +
                         std::to_string(b.nbytes));
  }
  if (is_read && b.readonly) throw_invalid_buffer("cannot read into a read-only buffer");
  if (!b.contiguous) throw_invalid_buffer("buffer is not contiguous: " + b.layout_note);
  return b;
}

std::chrono::milliseconds to_millis(double seconds) {
  if (!(seconds > 0)) return std::chrono::milliseconds(0);
  if (seconds > 1e9) seconds = 1e9;
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000.0)));
}

// The Python side of a ferry::Future. It keeps the buffer's owner alive until the request is done, and
// a Future dropped early waits for its request in its destructor, so that no task ever writes into
// memory Python has freed. result() may be called any number of times (it caches the outcome).
class PyFuture {
 public:
  PyFuture(Future future, py::object keep) : future_(std::move(future)), keep_(std::move(keep)) {}
  PyFuture(const PyFuture&) = delete;
  PyFuture& operator=(const PyFuture&) = delete;

  ~PyFuture() {
    if (!future_.valid()) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      future_.wait();
    } else {
      future_.wait();
    }
  }

  /// Never blocks: while another thread waits on this future, it answers from the settled flag alone.
  bool done() {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return settled_.load();
    return outcome_.has_value() || future_.done();
  }

  /// Waits (forever when `timeout` is None); returns done(). Ctrl-C interrupts an endless wait
  /// (KeyboardInterrupt); the request itself goes on, and this future still owns its buffer.
  bool wait(std::optional<double> timeout) {
    if (!timeout) {
      wait_interruptibly();
      return true;
    }
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return outcome_.has_value() || future_.wait_for(to_millis(*timeout));
  }

  /// Bytes transferred, or the request's error as a Python exception.
  std::uint64_t result() {
    wait_interruptibly();
    const Result<Transfer>& r = settle();
    if (!r.ok()) throw_status(r.status());
    return r->bytes;
  }

  /// (json, table) of the request's report; raises the request's error when it failed.
  py::tuple report() {
    wait_interruptibly();
    const Result<Transfer>& r = settle();
    if (!r.ok()) throw_status(r.status());
    return report_parts(r->report);
  }

  /// The error as an exception object, or None (waits first).
  py::object exception() {
    wait_interruptibly();
    const Result<Transfer>& r = settle();
    if (r.ok()) return py::none();
    try {
      throw_status(r.status());
    } catch (py::error_already_set& e) {
      return e.value();
    }
  }

 private:
  // Waits in slices with the GIL released, checking for signals between them.
  void wait_interruptibly() {
    for (;;) {
      bool finished = false;
      {
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(mutex_);
        finished = outcome_.has_value() || future_.wait_for(std::chrono::milliseconds(100));
      }
      if (finished) return;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  const Result<Transfer>& settle() {
    bool drop_keep = false;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      if (!outcome_) {
        outcome_.emplace(future_.get());
        settled_.store(true);
        drop_keep = true;
      }
    }
    if (drop_keep) keep_ = py::none();  // the request is over: let the buffer go
    return *outcome_;
  }

  std::mutex mutex_;  // guards future_ and outcome_; taken only with the GIL released (or by try_lock)
  std::atomic<bool> settled_{false};
  Future future_;
  std::optional<Result<Transfer>> outcome_;
  py::object keep_;
};

// A File, closed at most once. Python keeps File objects alive through their futures' references.
class PyFile {
 public:
  explicit PyFile(File file) : file_(std::make_unique<File>(std::move(file))) {}

  static std::unique_ptr<PyFile> open(const std::string& path, const std::string& mode,
                                      std::optional<Config> config) {
    std::optional<Result<File>> r;
    {
      py::gil_scoped_release release;
      r.emplace(config ? File::open(path, mode, *config) : File::open(path, mode));
    }
    return std::make_unique<PyFile>(unwrap(std::move(*r)));
  }

  std::unique_ptr<PyFuture> pread(py::object buffer, std::uint64_t size, std::uint64_t offset) {
    Buffer& b = checked_buffer(buffer, size, true);
    Future f;
    {
      py::gil_scoped_release release;
      f = file().pread(reinterpret_cast<void*>(b.address), size, offset);
    }
    return std::make_unique<PyFuture>(std::move(f), std::move(buffer));
  }

  std::unique_ptr<PyFuture> pwrite(py::object buffer, std::uint64_t size, std::uint64_t offset) {
    Buffer& b = checked_buffer(buffer, size, false);
    Future f;
    {
      py::gil_scoped_release release;
      f = file().pwrite(reinterpret_cast<const void*>(b.address), size, offset);
    }
    return std::make_unique<PyFuture>(std::move(f), std::move(buffer));
  }

  /// Blocking read at the file position into `buffer`: (bytes, (json, table)).
  py::tuple read_into(py::object buffer, std::uint64_t size) {
    Buffer& b = checked_buffer(buffer, size, true);
    std::optional<Result<Transfer>> r;
    {
      py::gil_scoped_release release;
      r.emplace(file().read(reinterpret_cast<void*>(b.address), size));
    }
    Transfer t = unwrap(std::move(*r));
    return py::make_tuple(t.bytes, report_parts(t.report));
  }

  /// Blocking read at the file position into a new bytes object: (bytes object, (json, table)).
  py::tuple read_bytes(std::uint64_t size) {
    if (size > static_cast<std::uint64_t>(PY_SSIZE_T_MAX)) throw py::value_error("size does not fit in bytes");
    PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
    if (raw == nullptr) throw py::error_already_set();
    std::optional<Result<Transfer>> r;
    {
      // Nobody else can see the new bytes object yet, so filling it without the GIL is safe.
      py::gil_scoped_release release;
      r.emplace(file().read(PyBytes_AS_STRING(raw), size));
    }
    if (!r->ok()) {
      Py_DECREF(raw);
      throw_status(r->status());
    }
    Transfer t = std::move(*r).value();
    if (t.bytes < size && _PyBytes_Resize(&raw, static_cast<Py_ssize_t>(t.bytes)) != 0) {
      throw py::error_already_set();  // _PyBytes_Resize freed `raw` on failure
    }
    py::object data = py::reinterpret_steal<py::object>(raw);
    return py::make_tuple(data, report_parts(t.report));
  }

  /// Blocking write at the file position (or the end, in mode "a"): (bytes, (json, table)).
  py::tuple write(py::object buffer, std::uint64_t size) {
    Buffer& b = checked_buffer(buffer, size, false);
    std::optional<Result<Transfer>> r;
    {
      py::gil_scoped_release release;
      r.emplace(file().write(reinterpret_cast<const void*>(b.address), size));
    }
    Transfer t = unwrap(std::move(*r));
    return py::make_tuple(t.bytes, report_parts(t.report));
  }

  std::uint64_t size() {
    std::optional<Result<std::uint64_t>> r;
    {
      py::gil_scoped_release release;
      r.emplace(file().size());
    }
    return unwrap(std::move(*r));
  }

  void sync() {
    Status s;
    {
      py::gil_scoped_release release;
      s = file().sync();
    }
    check(s);
  }

  void close() {
    if (closed_) return;
    Status s;
    {
      py::gil_scoped_release release;
      s = file_->close();
    }
    closed_ = true;
    check(s);
  }

  bool closed() const { return closed_; }
  const std::string& path() const { return file_->path(); }
  Config config() const { return file_->config(); }
  py::tuple report() const { return report_parts(file_->report()); }
  bool direct_io_available() const { return file_->direct_io_available(); }
  std::string direct_io_note() const { return file_->direct_io_note(); }

 private:
  File& file() {
    if (closed_) {
      throw_status(Status(ErrorCode::failed_precondition, "\"" + file_->path() + "\" is closed", EBADF,
                          file_->path()));
    }
    return *file_;
  }

  std::unique_ptr<File> file_;
  bool closed_ = false;
};

Config current_default_config() { return unwrap(default_config()); }

}  // namespace
}  // namespace ferry::python

PYBIND11_MODULE(_ferry, m) {
  using namespace ferry;
  using namespace ferry::python;
  m.doc() = "Ferry's private extension; use the `ferry` package.";

  py::class_<Buffer>(m, "Buffer", "Memory pinned for Ferry: a buffer-protocol view, a DLPack tensor or a pointer.")
      .def_static("from_buffer_protocol", &Buffer::from_buffer_protocol, py::arg("obj"))
      .def_static("from_dlpack", &Buffer::from_dlpack, py::arg("capsule"))
      .def_static("from_pointer", &Buffer::from_pointer, py::arg("address"), py::arg("nbytes"), py::arg("readonly"),
                  py::arg("device_type"), py::arg("device_id"), py::arg("owner"))
      .def_readonly("address", &Buffer::address)
      .def_readonly("nbytes", &Buffer::nbytes)
      .def_readonly("readonly", &Buffer::readonly)
      .def_readonly("contiguous", &Buffer::contiguous)
      .def_readonly("device_type", &Buffer::device_type)
      .def_readonly("device_id", &Buffer::device_id)
      .def_readonly("origin", &Buffer::origin)
      .def_readonly("layout_note", &Buffer::layout_note);

  py::class_<Config>(m, "Config", "A copy of Ferry's settings (ferry::Config).")
      .def(py::init<>())
      .def("copy", [](const Config& c) { return Config(c); })
      .def("get", &Config::get, py::arg("name"))
      .def("set", [](Config& c, const std::string& name, const std::string& value) {
             check(c.set(name, value, SettingSource::api));
           }, py::arg("name"), py::arg("value"))
      .def("source", [](const Config& c, const std::string& name) {
             return std::string(setting_source_name(c.source(name)));
           }, py::arg("name"));

  m.def("default_config", &current_default_config, "A copy of the configuration File.open uses by default.");
  m.def("set_default_config", &set_default_config, py::arg("config"));
  m.def("environment_config", [] { return unwrap(Config::from_environment()); },
        "Built-in defaults overridden by FERRY_* environment variables.");
  m.def("settings_table", [] {
    py::list rows;
    for (const auto& row : settings_table()) {
      rows.append(py::make_tuple(row.name, row.env, row.default_text, row.description));
    }
    return rows;
  });
  m.def("parse_size", [](const std::string& text, const std::string& setting) {
    return unwrap(parse_size(text, setting));
  }, py::arg("text"), py::arg("setting") = "size");
  m.def("format_size", &format_size, py::arg("bytes"));

  py::class_<PyFuture>(m, "Future", "A pending pread/pwrite.")
      .def("done", &PyFuture::done)
      .def("wait", &PyFuture::wait, py::arg("timeout") = py::none())
      .def("result", &PyFuture::result)
      .def("report", &PyFuture::report)
      .def("exception", &PyFuture::exception);

  py::class_<PyFile>(m, "File", "An open file (ferry::File).")
      .def_static("open", &PyFile::open, py::arg("path"), py::arg("mode"), py::arg("config") = py::none())
      .def("pread", &PyFile::pread, py::arg("buffer"), py::arg("size"), py::arg("offset"))
      .def("pwrite", &PyFile::pwrite, py::arg("buffer"), py::arg("size"), py::arg("offset"))
      .def("read_into", &PyFile::read_into, py::arg("buffer"), py::arg("size"))
      .def("read_bytes", &PyFile::read_bytes, py::arg("size"))
      .def("write", &PyFile::write, py::arg("buffer"), py::arg("size"))
      .def("size", &PyFile::size)
      .def("sync", &PyFile::sync)
      .def("close", &PyFile::close)
      .def_property_readonly("closed", &PyFile::closed)
      .def_property_readonly("path", &PyFile::path)
      .def("config", &PyFile::config)
      .def("report", &PyFile::report)
      .def("direct_io_available", &PyFile::direct_io_available)
      .def("direct_io_note", &PyFile::direct_io_note);

  m.def("process_report", [] { return report_parts(process_report()); });
  m.def("reset_process_report", [] { reset_process_report(); });
  m.def("error_code_names", [] {
    py::list names;
    for (int c = 0; c <= static_cast<int>(ErrorCode::internal); ++c) {
      names.append(error_code_name(static_cast<ErrorCode>(c)));
    }
    return names;
  });
  // Raises the exception a Status with these fields becomes (for tests of the mapping).
  m.def("_raise_status", [](const std::string& code, const std::string& message, int sys_errno,
                            const std::string& path) {
    for (int c = 0; c <= static_cast<int>(ErrorCode::internal); ++c) {
      if (code == error_code_name(static_cast<ErrorCode>(c))) {
        throw_status(Status(static_cast<ErrorCode>(c), message, sys_errno, path));
      }
    }
    throw py::value_error("unknown error code " + code);
  }, py::arg("code"), py::arg("message"), py::arg("errno") = 0, py::arg("path") = "");

  register_safetensors(m);

  m.def("doctor_json", [](const std::string& path, int device, bool probe) {
    py::gil_scoped_release release;
    return ferry::doctor_json(path, device, probe);
  }, py::arg("path"), py::arg("device"), py::arg("probe"));
}
