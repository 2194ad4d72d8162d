// The safetensors binding. Python allocates the memory (torch, CuPy or NumPy buffers, one per region of a
// LoadPlan) and builds the tensor views; C++ parses, validates, plans and reads. Every call that may block
// releases the GIL; progress comes back on the calling thread with the GIL re-acquired, which is also where
// Ctrl-C is noticed: a pending signal cancels the load (requests in flight finish first) and is raised.
#include "bindings.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "errors.hpp"
#include "ferry/safetensors.hpp"
#include "futures.hpp"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ferry::python {
namespace {

namespace st = ferry::safetensors;

py::dict stats_dict(const st::LoadStats& s) {
  return py::dict("bytes_read"_a = s.bytes_read, "bytes_copied"_a = s.bytes_copied, "requests"_a = s.requests,
                  "seconds"_a = s.seconds, "replicate_wait_seconds"_a = s.replicate_wait_seconds,
                  "report"_a = report_parts(s.report),  // the notes are for people, and may quote names not UTF-8
                  "notes"_a = list_of(s.notes, message_text));
}

/// `path`: bytes, as the kernel gets them (Python passes os.fsencode of what it was given).
st::Checkpoint open_checkpoint(const std::string& path, std::optional<Config> config, std::uint64_t max_header_bytes,
                               std::uint64_t max_staging_bytes) {
  st::OpenOptions o{.config = std::move(config), .max_header_bytes = max_header_bytes,
                    .max_staging_bytes = max_staging_bytes};
  return unwrap(without_gil([&] { return st::Checkpoint::open(path, o); }));
}

/// Reads into regions at `bases` (addresses of buffers Python allocated): the stats as a dict.
py::dict load_into(const st::Checkpoint& c, const st::LoadPlan& plan, const std::vector<std::uintptr_t>& bases,
                   std::uint64_t max_request_bytes, unsigned max_requests_in_flight, py::object progress,
                   double progress_interval_s) {
  std::vector<void*> pointers;
  for (std::uintptr_t b : bases) pointers.push_back(reinterpret_cast<void*>(b));
  st::LoadOptions o{.max_request_bytes = max_request_bytes, .max_requests_in_flight = max_requests_in_flight};
  return stats_dict(with_progress(std::move(progress), progress_interval_s, o, [&] {
    return c.load_into(plan, pointers, o);
  }));
}

/// Reads [(name, address, offset, size)] into caller memory: the stats as a dict. With `report_sum` (a
/// SafetensorsReportSum: a distributed load reads its part in rounds, one read_into each), the reads' report
/// is added to it too.
py::dict read_into(const st::Checkpoint& c,
                   const std::vector<std::tuple<std::string, std::uintptr_t, std::uint64_t, std::uint64_t>>& items,
                   std::uint64_t max_request_bytes, unsigned max_requests_in_flight, py::object progress,
                   double progress_interval_s, Report* report_sum) {
  std::vector<st::Destination> destinations;
  destinations.reserve(items.size());
  for (const auto& [name, address, offset, size] : items) {
    destinations.push_back(st::Destination{name, reinterpret_cast<void*>(address), offset, size});
  }
  st::LoadOptions o{.max_request_bytes = max_request_bytes, .max_requests_in_flight = max_requests_in_flight};
  st::LoadStats stats = with_progress(std::move(progress), progress_interval_s, o, [&] {
    return c.read_into(destinations, o);
  });
  if (report_sum != nullptr) report_sum->merge(stats.report);
  return stats_dict(stats);
}

}  // namespace

void register_safetensors(py::module_& m) {
  m.attr("SAFETENSORS_DEFAULT_MAX_HEADER_BYTES") = st::kDefaultMaxHeaderBytes;

  py::class_<st::LoadPlan>(m, "SafetensorsPlan", "Where a load puts each tensor (ferry::safetensors::LoadPlan).")
      // [(device, size_bytes, alignment, copy_of)]
      .def_property_readonly("regions", [](const st::LoadPlan& p) {
        return list_of(p.regions,
                       [](auto& r) { return py::make_tuple(r.device, r.size_bytes, r.alignment, r.copy_of); });
      })
      // [(tensor index, region, offset)], in tensor order
      .def_property_readonly("placements", [](const st::LoadPlan& p) {
        return list_of(p.placements, [](auto& x) { return py::make_tuple(x.tensor, x.region, x.offset); });
      })
      .def_property_readonly("read_bytes", [](const st::LoadPlan& p) { return p.read_bytes; });

  py::class_<Report>(m, "SafetensorsReportSum", "Route reports of several read_into calls, added up.")
      .def(py::init<>())
      .def("parts", &report_parts);

  py::class_<st::Checkpoint>(m, "SafetensorsCheckpoint",
                             "An opened safetensors checkpoint (ferry::safetensors::Checkpoint).")
      .def_static("open", &open_checkpoint, "path"_a, "config"_a = py::none(),
                  "max_header_bytes"_a = st::kDefaultMaxHeaderBytes, "max_staging_bytes"_a = 0)
      // The shard paths as bytes (Python decodes them with os.fsdecode, as File.path).
      .def("files", [](const st::Checkpoint& c) { return list_of(c.files(), [](auto& f) { return py::bytes(f); }); })
      // [(name, dtype, shape, size_bytes, shard, file_offset)], by shard then offset
      .def("tensors", [](const st::Checkpoint& c) {
        return list_of(c.tensors(), [](const st::TensorInfo& t) {
          return py::make_tuple(t.name, st::dtype_name(t.dtype), py::tuple(py::cast(t.shape)), t.size_bytes(),
                                t.shard, t.file_offset);
        });
      })
      .def("metadata", &st::Checkpoint::metadata)
      // [(file_bytes, header_bytes, metadata)] per shard
      .def("shard_facts", [](const st::Checkpoint& c) {
        return list_of(c.shard_facts(),
                       [](auto& f) { return py::make_tuple(f.file_bytes, f.header_bytes, f.metadata); });
      })
      .def("notes", [](const st::Checkpoint& c) { return list_of(c.notes(), message_text); })
      .def("data_bytes", &st::Checkpoint::data_bytes)
      .def("plan", [](const st::Checkpoint& c, int device, std::vector<std::pair<std::string, int>> device_map,
                      std::vector<int> replicas) {
        return unwrap(c.plan({.device = device, .device_map = std::move(device_map), .replicas = std::move(replicas)}));
      }, "device"_a, "device_map"_a, "replicas"_a)
      .def("load_into", &load_into, "plan"_a, "bases"_a, "max_request_bytes"_a = 0, "max_requests_in_flight"_a = 0,
           "progress"_a = py::none(), "progress_interval"_a = 0.1)
      .def("read_into", &read_into, "items"_a, "max_request_bytes"_a = 0, "max_requests_in_flight"_a = 0,
           "progress"_a = py::none(), "progress_interval"_a = 0.1, "report_sum"_a = nullptr);
}

}  // namespace ferry::python
