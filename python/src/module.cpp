// ferry._ferry: the private extension under the `ferry` package. It binds the public C++ API one to one
// (File, Future, Config, process reports) with the GIL released around every call that may block; the
// Python layer in ferry/__init__.py gives it its Pythonic shape (keyword arguments, buffers from any
// producer, dict reports, exceptions, argument checks). Of Ferry's internals only its fork helpers are used.
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "buffers.hpp"
#include "bindings.hpp"
#include "errors.hpp"
#include "ferry/doctor.hpp"
#include "ferry/ferry.hpp"
#include "ferry/remote.hpp"
#include "futures.hpp"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ferry::python {
namespace {

// The Python tests' watchdog (conftest.py) arms one per test, beside faulthandler's traceback dump: a flag
// that cancels the report when marked.
std::shared_ptr<Completion> pending_report(double seconds, std::string label) {
  auto cancelled = std::make_shared<Completion>();
  std::thread([cancelled, seconds, label = std::move(label)] {
    auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
    if (cancelled->wait_for(limit)) return;
    auto pending = pending_stream_requests();
    std::fprintf(stderr, "\nWATCHDOG: %s still running after %.0f s; stream-ordered requests pending: %zu\n",
                 label.c_str(), seconds, pending.size());
    for (const auto& line : pending) std::fprintf(stderr, "  %s\n", line.c_str());
    std::fflush(stderr);
  }).detach();
  return cancelled;
}

Config current_default_config() { return unwrap(default_config()); }

// A File whose close() runs once. Every request, the blocking ones too, goes through a PyFuture so that every
// wait can be interrupted; FileRequests counts them for close(). Thread safety: methods are called with the
// GIL held, from any thread (closing_ changes only with it held).
class PyFile {
 public:
  explicit PyFile(File file) : file_(std::make_unique<File>(std::move(file))) {}

  /// `credentials` (access key id, secret, session token): S3 credentials for a URL (ferry::remote::open).
  static std::unique_ptr<PyFile> open(const std::string& path, const std::string& mode, std::optional<Config> config,
                                      std::optional<std::tuple<std::string, std::string, std::string>> credentials) {
    std::optional<remote::Credentials> given;
    if (credentials) given = std::make_from_tuple<remote::Credentials>(*credentials);
    if (given && !config) config = current_default_config();
    auto r = without_gil([&] {
      return given ? remote::open(path, *given, *config, mode)
                   : (config ? File::open(path, mode, *config) : File::open(path, mode));
    });
    return std::make_unique<PyFile>(unwrap(std::move(r)));
  }

  /// A read or write of the first `size` bytes of `buffer`: at the file position when `where` is empty
  /// (read(), readinto() and write(), which wait for it), else at an offset (pread/pwrite), or at an offset
  /// and ordered on a CUstream (read_async/write_async).
  template <Direction D, typename... Where>
  std::unique_ptr<PyFuture> request(py::object buffer, std::uint64_t size, Where... where) {
    const Buffer& b = buffer.cast<const Buffer&>();
    if (size > b.nbytes) {
      throw_invalid_buffer("buffer too small: " + std::to_string(size) + " bytes requested, the buffer holds " +
                           std::to_string(b.nbytes));
    }
    if (D == Direction::read && b.readonly) throw_invalid_buffer("cannot read into a read-only buffer");
    if (!b.contiguous) throw_invalid_buffer("buffer is not contiguous: " + b.layout_note);
    return start(D, std::move(buffer), reinterpret_cast<void*>(b.address), size, where...);
  }

  /// File::pread_batch: piece i is sizes[i] bytes at offsets[i] into addresses[i], which lie in the
  /// buffers of `keep` (checked by the Python layer); `keep` stays alive until the batch is done.
  std::unique_ptr<PyFuture> pread_batch(py::object keep, py::array_t<std::uint64_t, py::array::c_style> addresses,
                                        py::array_t<std::uint64_t, py::array::c_style> sizes,
                                        py::array_t<std::uint64_t, py::array::c_style> offsets) {
    const auto n = static_cast<std::size_t>(addresses.size());
    if (static_cast<std::size_t>(sizes.size()) != n || static_cast<std::size_t>(offsets.size()) != n) {
      throw py::value_error("addresses, sizes and offsets differ in length");
    }
    std::vector<Piece> pieces(n);
    std::uint64_t total = 0;
    const std::uint64_t* a = addresses.data();
    const std::uint64_t* z = sizes.data();
    const std::uint64_t* o = offsets.data();
    for (std::size_t i = 0; i < n; ++i) {
      pieces[i] = Piece{reinterpret_cast<void*>(static_cast<std::uintptr_t>(a[i])), z[i], o[i]};
      total += z[i];
    }
    std::string what = "read a batch of " + std::to_string(n) + " pieces (" + std::to_string(total) + " bytes) from";
    return submit(std::move(keep), std::move(what), [&](File& f) { return f.pread_batch(pieces); });
  }

  std::uint64_t tell() { return open_file().tell(); }
  void seek(std::uint64_t to) { open_file().seek(to); }
  int fileno() { return open_file().fileno(); }
  std::uint64_t size() {
    return unwrap(without_gil([&f = open_file()] { return f.size(); }));
  }
  void sync() {
    check(without_gil([&f = open_file()] { return f.sync(); }));
  }

  /// Blocking read at the file position into a new bytes object: (bytes object, (json, table)).
  py::tuple read_bytes(std::uint64_t size) {
    if (size > static_cast<std::uint64_t>(PY_SSIZE_T_MAX)) {
      throw std::overflow_error("size does not fit in a bytes object");  // pybind11 raises OverflowError
    }
    open_file();  // a closed file allocates nothing
    py::object data = steal_or_throw(PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size)));
    std::uint64_t n = 0;
    py::object parts;
    {
      // Nobody else sees the new bytes object, so it is filled without the GIL; the future goes before
      // it, also when result() raises, so the request is over before the memory is freed.
      auto future = start(Direction::read, py::none(), PyBytes_AS_STRING(data.ptr()), size);
      n = future->result();
      parts = future->report();
    }
    if (n < size) {
      PyObject* raw = data.release().ptr();
      if (_PyBytes_Resize(&raw, static_cast<Py_ssize_t>(n)) != 0) throw py::error_already_set();  // freed raw
      data = py::reinterpret_steal<py::object>(raw);
    }
    return py::make_tuple(data, parts);
  }

  /// Refuses new requests, waits for those in flight, then closes the File. A signal handler's exception
  /// (Ctrl-C) during the wait cancels them all, and the File is closed once their running tasks stopped.
  void close() {
    if (closing_) return;
    closing_ = true;
    auto idle = [this](std::chrono::milliseconds d) { return requests_->wait_idle_for(d); };
    wait_interruptibly(idle, std::nullopt, [this] {
      cancel_requests(requests_.get());
      without_gil([this] {
        while (!requests_->wait_idle_for(std::chrono::seconds(1))) {
        }
      });
      (void)without_gil([this] { return file_->close(); });  // the interrupt is what the caller sees
    });
    reap_parked(false);
    check(without_gil([this] { return file_->close(); }));
  }

  /// Asks every request of this File still running to stop (ferry.File.__exit__ on KeyboardInterrupt).
  void cancel_all() { cancel_requests(requests_.get()); }

  bool closed() const { return closing_; }
  py::bytes path() const { return py::bytes(file_->path()); }
  Config config() const { return file_->config(); }
  /// This File's report, and `others'` added to it (ferry.kvikio: one CuFile over several Files).
  py::tuple report(const std::vector<const PyFile*>& others) const {
    Report sum = file_->report();
    for (const PyFile* other : others) sum.merge(other->file_->report());
    return report_parts(sum);
  }
  bool direct_io_available() const { return file_->direct_io_available(); }
  std::string direct_io_note() const { return file_->direct_io_note(); }

 private:
  File& open_file() {
    if (closing_) throw_closed(file_->path());
    return *file_;
  }

  // Starts a read or write of `size` bytes at `offset`, or (none) at the file position (File::read_at_position).
  std::unique_ptr<PyFuture> start(Direction direction, py::object keep, void* address, std::uint64_t size,
                                  std::optional<std::uint64_t> offset = std::nullopt,
                                  std::optional<std::uintptr_t> stream = std::nullopt) {
    const bool is_read = direction == Direction::read;
    const File& f = open_file();
    const bool local_file = f.fileno() >= 0;  // a remote object's task must stay interruptible mid-way
    const bool small = size <= f.config().task_size();  // a task or two, however it is aligned
    std::string what = std::string(is_read ? "read " : "write ") + std::to_string(size) + " bytes " +
                       (offset ? "at offset " + std::to_string(*offset) : "at the file position") +
                       (is_read ? " from" : " to");
    auto call = [&](File& file) {
      if (!offset) return is_read ? file.read_at_position(address, size) : file.write_at_position(address, size);
      if (stream) {
        auto* s = reinterpret_cast<void*>(*stream);
        return is_read ? file.read_async(address, size, *offset, s) : file.write_async(address, size, *offset, s);
      }
      return is_read ? file.pread(address, size, *offset) : file.pwrite(address, size, *offset);
    };
    return submit(std::move(keep), std::move(what), call, /*at_position=*/!offset,
                  /*waiter_runs=*/local_file && !stream && small);
  }

  // Submits `call(file)` as a request of this File, counted for close(), as a PyFuture that keeps `keep` alive
  // until it is over; `what` ("read 8 bytes at offset 0 from") and the path name the request in its errors.
  template <typename Call>
  std::unique_ptr<PyFuture> submit(py::object keep, std::string what, Call&& call, bool at_position = false,
                                   bool waiter_runs = false) {
    File& f = open_file();
    reap_parked(false);
    requests_->started();  // with the GIL still held: a close() from now on waits for this request
    Future future = without_gil([&] { return call(f); });
    return std::make_unique<PyFuture>(std::move(future), std::move(keep), requests_,
                                      std::move(what) + " \"" + f.path() + "\"", f.path(), at_position, waiter_runs);
  }

  std::unique_ptr<File> file_;
  std::shared_ptr<FileRequests> requests_ = std::make_shared<FileRequests>();
  bool closing_ = false;  // close() began: new requests are refused
};

}  // namespace
}  // namespace ferry::python

PYBIND11_MODULE(_ferry, m) {
  ferry::python::install_sigint_counter();
  using namespace ferry;
  using namespace ferry::python;
  m.doc() = "Ferry's private extension; use the `ferry` package.";

  py::class_<Buffer>(m, "Buffer", "Memory pinned for Ferry: a buffer-protocol view, a DLPack tensor or a pointer.")
      .def_static("from_buffer_protocol", &Buffer::from_buffer_protocol, "obj"_a)
      .def_static("from_dlpack", &Buffer::from_dlpack, "capsule"_a)
      .def_static("from_pointer", &Buffer::from_pointer, "address"_a, "nbytes"_a, "readonly"_a, "device_type"_a,
                  "device_id"_a, "owner"_a, "origin"_a)
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
      .def("get", &Config::get, "name"_a)
      .def("set", [](Config& c, const std::string& name, const std::string& value) {
             check(c.set(name, value, SettingSource::api));
           }, "name"_a, "value"_a)
      .def("source", [](const Config& c, const std::string& name) {
             return std::string(setting_source_name(c.source(name)));
           }, "name"_a);

  m.def("default_config", &current_default_config, "A copy of the configuration File.open uses by default.");
  m.def("set_default_config", &set_default_config, "config"_a);
  m.def("pinned_memory", [] {
    const PinnedMemoryUse use = pinned_memory_use();
    return py::dict("budget"_a = use.budget, "pinned_bytes"_a = use.pinned_bytes, "peak_bytes"_a = use.peak_bytes,
                    "waits"_a = use.waits, "waited_seconds"_a = use.waited_seconds);
  });
  m.def("warm_up", [](int device, std::optional<Config> config) {
    const Config c = config ? *config : current_default_config();
    check(without_gil([&] { return warm_up(device, c); }));  // it pins for tens of ms
  }, "device"_a, "config"_a = py::none());
  m.def("environment_config", [] { return unwrap(Config::from_environment()); },
        "Built-in defaults overridden by FERRY_* environment variables.");
  m.def("route_names", [] {
    py::tuple names(kRouteCount);
    for (std::size_t i = 0; i < kRouteCount; ++i) names[i] = route_name(static_cast<Route>(i));
    return names;
  }, "route_name() of every Route, in report order.");
  m.def("settings_table", [] {
    return list_of(settings_table(), [](auto& row) {
      return py::make_tuple(row.name, row.env, row.default_text, row.description);
    });
  });
  m.def("parse_size", [](const std::string& text, const std::string& setting) {
    return unwrap(parse_size(text, setting));
  }, "text"_a, "setting"_a = "size");
  m.def("format_size", &format_size, "bytes"_a);

  py::class_<PyFuture>(m, "Future", "A pending pread/pwrite.", py::custom_type_setup(&set_up_future_type))
      .def("done", &PyFuture::done)
      .def("wait", &PyFuture::wait, "timeout"_a = py::none())
      .def("result", &PyFuture::result)
      .def("report", &PyFuture::report)
      .def("exception", &PyFuture::exception)
      .def("cancel", &PyFuture::cancel, "wait"_a = true)
      .def("bytes_done", &PyFuture::bytes_done)
      .def("notify_when_done", &PyFuture::notify_when_done, "token"_a);
  m.def("wait_for_done_futures", &wait_for_done_futures, "timeout"_a = py::none(),
        "Tokens of the futures given to notify_when_done() whose requests completed since the last call; waits "
        "(GIL released) for at least one, at most `timeout` seconds.");

  py::class_<PyFile>(m, "File", "An open file (ferry::File).")
      .def_static("open", &PyFile::open, "path"_a, "mode"_a, "config"_a = py::none(), "credentials"_a = py::none())
      .def("pread", &PyFile::request<Direction::read, std::uint64_t>, "buffer"_a, "size"_a, "offset"_a)
      .def("pread_batch", &PyFile::pread_batch, "keep"_a, "addresses"_a, "sizes"_a, "offsets"_a)
      .def("pwrite", &PyFile::request<Direction::write, std::uint64_t>, "buffer"_a, "size"_a, "offset"_a)
      .def("read_bytes", &PyFile::read_bytes, "size"_a)
      .def("read_async", &PyFile::request<Direction::read, std::uint64_t, std::uintptr_t>, "buffer"_a,
           "size"_a, "offset"_a, "stream"_a)
      .def("write_async", &PyFile::request<Direction::write, std::uint64_t, std::uintptr_t>, "buffer"_a,
           "size"_a, "offset"_a, "stream"_a)
      .def("read_at_position", &PyFile::request<Direction::read>, "buffer"_a, "size"_a)
      .def("write_at_position", &PyFile::request<Direction::write>, "buffer"_a, "size"_a)
      .def("tell", &PyFile::tell)
      .def("seek", &PyFile::seek, "position"_a)
      .def("fileno", &PyFile::fileno)
      .def("size", &PyFile::size)
      .def("sync", &PyFile::sync)
      .def("close", &PyFile::close)
      .def("cancel_all", &PyFile::cancel_all)
      .def_property_readonly("closed", &PyFile::closed)
      .def_property_readonly("path", &PyFile::path)
      .def("config", &PyFile::config)
      .def("report", &PyFile::report, "others"_a = std::vector<const PyFile*>())
      .def("direct_io_available", &PyFile::direct_io_available)
      .def("direct_io_note", &PyFile::direct_io_note);

  m.def("cancel_all_requests", [] { cancel_requests(nullptr); },
        "Asks every request still running, of every file, to stop (at exit after an unhandled Ctrl-C).");
  m.def("reap_parked", &reap_parked, "wait"_a,
        "Lets go of the buffers of futures dropped by an interrupt once their requests are over.");
  m.def("process_report", [] { return report_parts(process_report()); });
  py::class_<Completion, std::shared_ptr<Completion>>(
      m, "_PendingReport",
      "Prints the pending stream-ordered requests to stderr after `seconds`, from a thread of its own (so a hang "
      "with the GIL held still gets it), unless cancelled first.")
      .def(py::init(&pending_report), "seconds"_a, "label"_a)
      .def("cancel", &Completion::mark);
  // ferry.page_cache: (cached_bytes, range_bytes, page_bytes, method).
  auto residency_tuple = [](const page_cache::Residency& r) {
    return py::make_tuple(r.cached_bytes, r.range_bytes, r.page_bytes, r.method);
  };
  m.def("page_cache_residency", [residency_tuple](const std::string& path, std::uint64_t offset, std::uint64_t length) {
    return residency_tuple(unwrap(without_gil([&] { return page_cache::residency(path, offset, length); })));
  }, "path"_a, "offset"_a, "length"_a);
  m.def("page_cache_evict", [residency_tuple](const std::string& path, bool write_back_first) {
    return residency_tuple(unwrap(without_gil([&] { return page_cache::evict(path, write_back_first); })));
  }, "path"_a, "write_back_first"_a);
  m.def("reset_process_report", [] { reset_process_report(); });
  // The error codes and the exception a Status with these fields becomes, for tests of the mapping.
  auto error_codes = [] {
    std::vector<ErrorCode> codes;
    for (int c = 0; c <= static_cast<int>(ErrorCode::internal); ++c) codes.push_back(static_cast<ErrorCode>(c));
    return codes;
  };
  m.def("error_code_names", [error_codes] { return list_of(error_codes(), error_code_name); });
  m.def("_raise_status", [error_codes](const std::string& code, const std::string& message, int sys_errno,
                                       const std::string& path) {
    for (ErrorCode c : error_codes()) {
      if (code == error_code_name(c)) throw_status(Status(c, message, sys_errno, path));
    }
    throw py::value_error("unknown error code " + code);
  }, "code"_a, "message"_a, "errno"_a = 0, "path"_a = "");

  // The CUDA checks ferry/_buffers.py makes before it hands a producer's pointer to C++ (through Ferry's own
  // driver table, never ctypes).
  m.def("describe_memory", [](std::uintptr_t address) {
    MemoryInfo info = unwrap(describe_memory(reinterpret_cast<const void*>(address)));
    return py::make_tuple(info.kind, info.device, info.allocation_start, info.allocation_size);
  }, "address"_a, "(kind, device, allocation start, allocation size) of a pointer, as CUDA knows it.");
  m.def("synchronize_stream", [](std::uintptr_t stream, int device) {
    check(without_gil([&] { return synchronize_stream(reinterpret_cast<void*>(stream), device); }));
  }, "stream"_a, "device"_a, "Waits for the work queued on a CUDA stream of the device.");
  m.def("cuda_driver_error", []() -> py::object {
    Status status = cuda_driver_status();
    if (status.ok()) return py::none();
    return message_text(status.message());
  }, "None where the CUDA driver can be used, else why not.");
  register_safetensors(m);
  register_safetensors_save(m);
  m.def("remote_unavailable_reason", &remote::unavailable_reason);
  m.def("remote_display_url", [](const std::string& url) { return remote::display_url(url); });
  m.def("is_remote_url", [](const std::string& url) { return remote::is_remote_url(url); });

  m.def("doctor_json", [](const std::string& path, int device, bool probe) {
    return without_gil([&] { return ferry::doctor_json(path, device, probe); });
  }, "path"_a, "device"_a, "probe"_a);
}
