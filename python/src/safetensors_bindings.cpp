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
#include "progress_bridge.hpp"
#include "ferry/safetensors.hpp"
#include "futures.hpp"

namespace py = pybind11;

namespace ferry::python {
namespace {

namespace st = ferry::safetensors;

py::dict stats_dict(const st::LoadStats& s) {
  py::dict d;
  d["bytes_read"] = s.bytes_read;
  d["bytes_copied"] = s.bytes_copied;
  d["requests"] = s.requests;
  d["seconds"] = s.seconds;
  d["replicate_wait_seconds"] = s.replicate_wait_seconds;
  d["report"] = report_parts(s.report);
  d["notes"] = list_of(s.notes, message_text);  // for people: they may quote file names that are not UTF-8
  return d;
}

st::LoadOptions request_options(std::uint64_t max_request_bytes, unsigned max_requests_in_flight) {
  st::LoadOptions o;
  o.max_request_bytes = max_request_bytes;
  o.max_requests_in_flight = max_requests_in_flight;
  return o;
}

/// A plan's regions: [(device, size_bytes, alignment, copy_of)].
py::list regions(const st::LoadPlan& p) {
  return list_of(p.regions, [](auto& r) { return py::make_tuple(r.device, r.size_bytes, r.alignment, r.copy_of); });
}

/// A plan's placements: [(tensor index, region, offset)], in tensor order.
py::list placements(const st::LoadPlan& p) {
  return list_of(p.placements, [](auto& x) { return py::make_tuple(x.tensor, x.region, x.offset); });
}

/// `path`: bytes, as the kernel gets them (Python passes os.fsencode of what it was given).
st::Checkpoint open_checkpoint(const std::string& path, std::optional<Config> config, std::uint64_t max_header_bytes,
                               std::uint64_t max_staging_bytes) {
  st::OpenOptions o;
  o.config = std::move(config);
  o.max_header_bytes = max_header_bytes;
  o.max_staging_bytes = max_staging_bytes;
  return unwrap(without_gil([&] { return st::Checkpoint::open(path, o); }));
}

/// The shard paths as bytes (Python decodes them with os.fsdecode, as File.path).
py::list files(const st::Checkpoint& c) {
  return list_of(c.files(), [](const std::string& f) { return py::bytes(f); });
}

/// [(name, dtype, shape, size_bytes, shard, file_offset)], by shard then offset.
py::list tensors(const st::Checkpoint& c) {
  return list_of(c.tensors(), [](const st::TensorInfo& t) {
    return py::make_tuple(t.name, st::dtype_name(t.dtype), py::tuple(py::cast(t.shape)), t.size_bytes(), t.shard,
                          t.file_offset);
  });
}

/// [(file_bytes, header_bytes, metadata)] per shard.
py::list shard_facts(const st::Checkpoint& c) {
  return list_of(c.shard_facts(), [](auto& f) { return py::make_tuple(f.file_bytes, f.header_bytes, f.metadata); });
}

st::LoadPlan make_plan(const st::Checkpoint& c, int device, std::vector<std::pair<std::string, int>> device_map,
                       std::vector<int> replicas) {
  st::LoadOptions o;
  o.device = device;
  o.device_map = std::move(device_map);
  o.replicas = std::move(replicas);
  return unwrap(c.plan(o));
}

/// Reads into regions at `bases` (addresses of buffers Python allocated): the stats as a dict.
py::dict load_into(const st::Checkpoint& c, const st::LoadPlan& plan, const std::vector<std::uintptr_t>& bases,
                   std::uint64_t max_request_bytes, unsigned max_requests_in_flight, py::object progress,
                   double progress_interval_s) {
  std::vector<void*> pointers;
  for (std::uintptr_t b : bases) pointers.push_back(reinterpret_cast<void*>(b));
  st::LoadOptions o = request_options(max_request_bytes, max_requests_in_flight);
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
  st::LoadOptions o = request_options(max_request_bytes, max_requests_in_flight);
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
      .def_property_readonly("regions", &regions)
      .def_property_readonly("placements", &placements)
      .def_property_readonly("read_bytes", [](const st::LoadPlan& p) { return p.read_bytes; });

  py::class_<Report>(m, "SafetensorsReportSum", "Route reports of several read_into calls, added up.")
      .def(py::init<>())
      .def("parts", &report_parts);

  py::class_<st::Checkpoint>(m, "SafetensorsCheckpoint",
                             "An opened safetensors checkpoint (ferry::safetensors::Checkpoint).")
      .def_static("open", &open_checkpoint, py::arg("path"), py::arg("config") = py::none(),
                  py::arg("max_header_bytes") = st::kDefaultMaxHeaderBytes, py::arg("max_staging_bytes") = 0)
      .def("files", &files)
      .def("tensors", &tensors)
      .def("metadata", &st::Checkpoint::metadata)
      .def("shard_facts", &shard_facts)
      .def("notes", [](const st::Checkpoint& c) { return list_of(c.notes(), message_text); })
      .def("data_bytes", &st::Checkpoint::data_bytes)
      .def("plan", &make_plan, py::arg("device"), py::arg("device_map"), py::arg("replicas"))
      .def("load_into", &load_into, py::arg("plan"), py::arg("bases"), py::arg("max_request_bytes") = 0,
           py::arg("max_requests_in_flight") = 0, py::arg("progress") = py::none(),
           py::arg("progress_interval") = 0.1)
      .def("read_into", &read_into, py::arg("items"), py::arg("max_request_bytes") = 0,
           py::arg("max_requests_in_flight") = 0, py::arg("progress") = py::none(),
           py::arg("progress_interval") = 0.1, py::arg("report_sum") = nullptr);
}

}  // namespace ferry::python
