#include "remote_bindings.hpp"

#include <cstdint>
#include <memory>
#include <string>

#include <pybind11/stl.h>

#include "errors.hpp"
#include "ferry/remote.hpp"

namespace py = pybind11;

namespace ferry::python {
namespace {

using ferry::remote::Addressing;
using ferry::remote::Object;
using ferry::remote::Options;

[[noreturn]] void bad_option(const std::string& what) {
  throw_status(Status(ErrorCode::invalid_argument, "Invalid remote option " + what));
}

// The environment's settings (FERRY_REMOTE_*, FERRY_S3_*), then the caller's keyword arguments.
Options options_from(const py::dict& given) {
  Options o = unwrap(Options::from_environment());
  for (auto item : given) {
    const std::string key = py::str(item.first);
    py::handle v = item.second;
    if (v.is_none()) continue;
    auto as_u64 = [&]() -> std::uint64_t {
      if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v) || v.cast<long long>() < 0) {
        bad_option(key + "=" + std::string(py::str(py::repr(v))) + ": expected a non-negative int");
      }
      return v.cast<std::uint64_t>();
    };
    auto as_text = [&]() -> std::string {
      if (!py::isinstance<py::str>(v)) bad_option(key + ": expected a str");
      return v.cast<std::string>();
    };
    if (key == "connections") {
      o.connections = static_cast<unsigned>(std::min<std::uint64_t>(as_u64(), 1u << 20));
    } else if (key == "part_size") {
      o.part_size_bytes = as_u64();
    } else if (key == "max_retries") {
      o.max_retries = static_cast<unsigned>(std::min<std::uint64_t>(as_u64(), 1u << 20));
    } else if (key == "retry_delay_ms") {
      o.retry_base_delay_ms = static_cast<std::uint32_t>(std::min<std::uint64_t>(as_u64(), 3600000));
    } else if (key == "retry_max_delay_ms") {
      o.retry_max_delay_ms = static_cast<std::uint32_t>(std::min<std::uint64_t>(as_u64(), 3600000));
    } else if (key == "connect_timeout_ms") {
      o.connect_timeout_ms = static_cast<std::uint32_t>(std::min<std::uint64_t>(as_u64(), 3600000));
    } else if (key == "stall_timeout_ms") {
      o.stall_timeout_ms = static_cast<std::uint32_t>(std::min<std::uint64_t>(as_u64(), 3600000));
    } else if (key == "verify_tls") {
      o.verify_tls = v.cast<bool>();
    } else if (key == "anonymous") {
      o.anonymous = v.cast<bool>();
    } else if (key == "region") {
      o.region = as_text();
    } else if (key == "endpoint") {
      o.endpoint = as_text();
    } else if (key == "profile") {
      o.profile = as_text();
    } else if (key == "access_key_id") {
      o.access_key_id = as_text();
    } else if (key == "secret_access_key") {
      o.secret_access_key = as_text();
    } else if (key == "session_token") {
      o.session_token = as_text();
    } else if (key == "addressing") {
      const std::string a = as_text();
      if (a == "automatic") {
        o.addressing = Addressing::automatic;
      } else if (a == "path") {
        o.addressing = Addressing::path;
      } else if (a == "virtual_host") {
        o.addressing = Addressing::virtual_host;
      } else {
        bad_option("addressing=\"" + a + "\": expected automatic, path or virtual_host");
      }
    } else {
      bad_option("\"" + key + "\"");
    }
  }
  return o;
}

py::dict counters_dict(const ferry::remote::Counters& c) {
  py::dict d;
  d["bytes"] = c.bytes;
  d["requests"] = c.requests;
  d["retries"] = c.retries;
  d["connections"] = c.connections;
  d["read_calls"] = c.read_calls;
  d["read_seconds"] = static_cast<double>(c.read_nanoseconds) / 1e9;
  return d;
}

}  // namespace

void register_remote(py::module_& m) {
  py::class_<Object>(m, "RemoteObject", "An HTTP(S) or S3 object open for reading (ferry::remote::Object).")
      .def(py::init([](const std::string& url, const py::dict& options, const std::string& mode) {
             Options o = options_from(options);
             Result<Object> opened = [&] {
               py::gil_scoped_release release;
               return Object::open(url, o, mode);
             }();
             return std::make_unique<Object>(unwrap(std::move(opened)));
           }),
           py::arg("url"), py::arg("options"), py::arg("mode") = "r")
      .def("read_into",
           [](Object& o, std::uintptr_t address, std::uint64_t size, std::uint64_t offset) {
             Result<std::uint64_t> got = [&] {
               py::gil_scoped_release release;
               return o.read(reinterpret_cast<void*>(address), size, offset);
             }();
             return unwrap(std::move(got));
           },
           py::arg("address"), py::arg("size"), py::arg("offset"))
      .def_property_readonly("size", &Object::size)
      .def_property_readonly("etag", &Object::etag)
      .def_property_readonly("ranges_supported", &Object::ranges_supported)
      .def_property_readonly("url", &Object::url)
      .def_property_readonly("request_url", &Object::request_url)
      .def_property_readonly("connections", [](const Object& o) { return o.options().connections; })
      .def("counters", [](const Object& o) { return counters_dict(o.counters()); });
  m.def("remote_unavailable_reason", &ferry::remote::unavailable_reason);
  m.def("remote_display_url", [](const std::string& url) { return ferry::remote::display_url(url); });
  m.def("is_remote_url", [](const std::string& url) { return ferry::remote::is_remote_url(url); });
}

}  // namespace ferry::python
