// The safetensors save binding. Python turns its tensors into (name, dtype, shape, address) rows, having
// checked them the way its framework's reference refuses them; C++ serialises, stages and writes. Every
// call that may block releases the GIL; waits on a background save wake every kWaitSlice to run signal
// handlers, and a KeyboardInterrupt there cancels the save (the target is then left as it was).
#include "bindings.hpp"

#include <map>
#include <optional>
#include <string>
#include <tuple>
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

using Row = std::tuple<std::string, std::string, std::vector<std::uint64_t>, std::uintptr_t>;
using Metadata = std::optional<std::map<std::string, std::string>>;

// What every save takes, converted once from Python's rows and arguments (SafetensorsSaveJob).
struct SaveJob {
  std::vector<st::SaveTensor> tensors;
  st::SaveOptions options;
};

SaveJob save_job(const std::vector<Row>& rows, Metadata metadata, bool durable, std::optional<Config> config,
                 std::uint64_t max_staging_bytes, bool refuse_overlapping) {
  SaveJob job{.options = {.metadata = std::move(metadata), .durable = durable, .config = std::move(config),
                          .max_staging_bytes = max_staging_bytes, .refuse_overlapping = refuse_overlapping}};
  job.tensors.reserve(rows.size());
  for (const auto& [name, dtype, shape, address] : rows) {
    auto d = st::dtype_from_name(dtype);
    if (!d) throw py::value_error("tensor '" + name + "': unknown safetensors dtype " + dtype);
    job.tensors.push_back(st::SaveTensor{name, *d, shape, reinterpret_cast<const void*>(address)});
  }
  return job;
}

py::dict stats_dict(const st::SaveStats& s) {
  return py::dict("path"_a = py::bytes(s.path), "target"_a = py::bytes(s.target), "replaced"_a = s.replaced,
                  "file_bytes"_a = s.file_bytes, "tensors"_a = s.tensors, "device_bytes"_a = s.device_bytes,
                  "staging_bytes"_a = s.staging_bytes, "staging_pinned"_a = s.staging_pinned,
                  "requests"_a = s.requests, "seconds"_a = s.seconds, "snapshot_seconds"_a = s.snapshot_seconds,
                  "snapshot_wait_seconds"_a = s.snapshot_wait_seconds, "sync_seconds"_a = s.sync_seconds,
                  "commit_seconds"_a = s.commit_seconds, "report"_a = report_parts(s.report),
                  // the notes may quote a directory whose name is not UTF-8
                  "notes"_a = list_of(s.notes, message_text));
}

py::dict save(const std::string& path, SaveJob job, py::object progress, double progress_interval_s) {
  return stats_dict(with_progress(std::move(progress), progress_interval_s, job.options, [&] {
    return st::save(path, job.tensors, job.options);
  }));
}

// A background save as Python holds it: the handle, and the Python objects whose memory the save reads,
// kept until the snapshot is taken. Dropping it waits for the save (without the GIL), then lets them go.
class PySaveHandle {
 public:
  PySaveHandle(st::SaveHandle handle, py::object keep) : handle_(std::move(handle)), keep_(std::move(keep)) {}
  ~PySaveHandle() {
    without_gil([this] { handle_.reset(); });  // keep_ goes after, with the GIL
  }

  /// Whether the snapshot was taken within `timeout` (None: waits); raises the save's error.
  bool snapshot(std::optional<double> timeout) {
    bool taken = wait_interruptibly([this](std::chrono::milliseconds d) { return handle_->wait_snapshot_for(d); },
                                    deadline_after(timeout), [this] { handle_->cancel(); });
    if (!taken) return false;
    Status s = without_gil([this] { return handle_->snapshot(); });
    keep_ = py::none();  // no tensor is read any more
    check(s);
    return true;
  }

  /// The stats once the file is under its name (None if `timeout` passed first: the caller raises).
  std::optional<py::dict> result(std::optional<double> timeout) {
    bool ended = wait_interruptibly([this](std::chrono::milliseconds d) { return handle_->wait_for(d); },
                                    deadline_after(timeout), [this] { handle_->cancel(); });
    if (!ended) return std::nullopt;
    auto r = without_gil([this] { return handle_->result(); });
    keep_ = py::none();
    return stats_dict(unwrap(std::move(r)));
  }

  bool done() const { return handle_->done(); }
  void cancel() const { handle_->cancel(); }
  std::uint64_t bytes_written() const { return handle_->bytes_written(); }
  std::uint64_t file_bytes() const { return handle_->file_bytes(); }

 private:
  std::optional<st::SaveHandle> handle_;
  py::object keep_;
};

std::unique_ptr<PySaveHandle> start_save(const std::string& path, const SaveJob& job, py::object keep) {
  auto handle = unwrap(without_gil([&] { return st::start_save(path, job.tensors, job.options); }));
  return std::make_unique<PySaveHandle>(std::move(handle), std::move(keep));
}

py::dict save_sharded(const std::string& directory, SaveJob job, std::uint64_t max_shard_bytes,
                      const std::string& prefix, bool remove_stale, py::object progress, double progress_interval_s) {
  st::ShardedSaveOptions o{.save = std::move(job.options), .max_shard_bytes = max_shard_bytes, .prefix = prefix,
                           .remove_stale = remove_stale};
  st::ShardedSaveStats s = with_progress(std::move(progress), progress_interval_s, o.save, [&] {
    return st::save_sharded(directory, job.tensors, o);
  });
  auto as_bytes = [](const std::string& path) { return py::bytes(path); };
  return py::dict("files"_a = list_of(s.files, as_bytes),
                  "index"_a = s.index.empty() ? py::object(py::none()) : py::object(py::bytes(s.index)),
                  "total_size"_a = s.total_size, "aliases"_a = s.aliases, "removed"_a = list_of(s.removed, as_bytes),
                  "shards"_a = list_of(s.shards, stats_dict), "seconds"_a = s.seconds);
}

}  // namespace

void register_safetensors_save(py::module_& m) {
  py::class_<SaveJob>(m, "SafetensorsSaveJob", "The tensors and options of a save (SaveTensor rows, SaveOptions).")
      .def(py::init(&save_job), "tensors"_a, "metadata"_a, "durable"_a, "config"_a, "max_staging_bytes"_a,
           "refuse_overlapping"_a);
  m.def("safetensors_save", &save, "path"_a, "job"_a, "progress"_a, "progress_interval"_a = 0.1);
  m.def("safetensors_start_save", &start_save, "path"_a, "job"_a, "keep"_a);
  m.def("safetensors_save_sharded", &save_sharded, "directory"_a, "job"_a, "max_shard_bytes"_a, "prefix"_a,
        "remove_stale"_a, "progress"_a, "progress_interval"_a = 0.1);
  py::class_<PySaveHandle>(m, "SafetensorsSaveHandle", "A background save (ferry::safetensors::SaveHandle).")
      .def("snapshot", &PySaveHandle::snapshot, "timeout"_a = py::none())
      .def("result", &PySaveHandle::result, "timeout"_a = py::none())
      .def("done", &PySaveHandle::done)
      .def("cancel", &PySaveHandle::cancel)
      .def_property_readonly("bytes_written", &PySaveHandle::bytes_written)
      .def_property_readonly("file_bytes", &PySaveHandle::file_bytes);
}

}  // namespace ferry::python
