// Saving one file: checks, the destination and its temporary file, staging, the image's writes, sync and
// rename; in the foreground or on a thread of its own behind a SaveHandle.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "backends/staging_pool.hpp"
#include "base/process_limits.hpp"
#include "base/timing.hpp"
#include "file/output_file.hpp"
#include "platform/cuda/buffer_kind.hpp"
#include "platform/gpu_platform.hpp"
#include "safetensors/image_writer.hpp"
#include "safetensors/save_staging.hpp"
#include "safetensors/saver.hpp"
#include "safetensors/text.hpp"

namespace ferry::safetensors {
namespace detail {
namespace {

using ferry::detail::CudaApi;

Status refusal(const std::string& path, const Status& cause) {
  return Status(cause.code(), fmt::format("Could not save \"{}\": {}", path, cause.message()), cause.sys_errno(),
                cause.path().empty() ? path : cause.path());
}

// Everything a save needs once the checks passed; what the thread running it owns.
struct PreparedSave {
  std::string path;
  SaveOptions options;
  std::vector<std::string> names;  // the pieces point into these
  HeaderImage image;
  std::vector<ImagePiece> pieces;
  const CudaApi* api = nullptr;    // set where some tensor is in GPU memory
  int staging_device = -1;
  std::size_t windows = 0;
  Config config;
  ferry::detail::OutputDestination dest;
  std::optional<ferry::detail::TempFile> temp;
  std::optional<File> file;
  std::uint64_t started_ns = 0;  // ferry::detail::now_ns()
  std::vector<std::string> notes;
};

// Where each tensor's bytes are: GPU ordinal, or -1. CUDA is asked only where it is loaded already (a
// process that never used a GPU cannot hold GPU memory), so host-only saves never start it.
Result<std::vector<int>> locate(std::span<const SaveTensor> tensors, const HeaderImage& image,
                                const ferry::detail::GpuPlatform& gpu, const CudaApi** api) {
  std::vector<int> devices(tensors.size(), -1);
  *api = nullptr;
  if (gpu.cuda_loaded && !gpu.cuda_loaded()) return devices;
  Status why;
  const CudaApi* cuda = gpu.cuda(&why);
  if (cuda == nullptr) return devices;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (image.size_bytes[i] == 0) continue;
    auto kind = ferry::detail::classify_buffer(cuda, tensors[i].data, image.size_bytes[i]);
    if (!kind.ok()) {
      return Status(kind.status().code(),
                    fmt::format("tensor {}: {}", quoted_text(tensors[i].name), kind.status().message()));
    }
    if (!kind->is_host()) {
      devices[i] = kind->device;
      *api = cuda;
    }
  }
  return devices;
}

// Background saves stage the whole file where they can, so that the snapshot is over soon. Pinned staging
// takes at most half the pinned budget (two windows at least: the smallest budget holds them), leaving room
// for the reads that run meanwhile.
std::size_t staging_windows(const SaveOptions& options, std::uint64_t file_bytes, bool background, bool pinned,
                            std::vector<std::string>& notes) {
  std::uint64_t want = options.max_staging_bytes;
  if (want == 0) {
    want = background ? std::min(file_bytes, ferry::detail::usable_memory_bytes() / 4) : kDefaultSaveStaging;
  }
  std::uint64_t windows = std::max<std::uint64_t>(2, (want + kSaveWindowBytes - 1) / kSaveWindowBytes);
  windows = std::min(windows, (file_bytes + kSaveWindowBytes - 1) / kSaveWindowBytes);
  if (pinned) {
    const std::uint64_t budget = ferry::detail::process_staging_pool().budget();
    const std::uint64_t most = std::max<std::uint64_t>(2, budget / 2 / kSaveWindowBytes);
    if (windows > most) {
      notes.push_back(fmt::format("staging: {} window(s), half of pinned_budget ({}), not the {} asked for", most,
                                  format_size(budget), windows));
      windows = most;
    }
  }
  return static_cast<std::size_t>(windows);
}

Result<std::unique_ptr<PreparedSave>> prepare(const std::string& path, std::span<const SaveTensor> tensors,
                                              const SaveOptions& options, const ferry::detail::OpenOptions& seams,
                                              bool background) {
  auto p = std::make_unique<PreparedSave>();
  p->started_ns = ferry::detail::now_ns();
  p->path = path;
  p->options = options;
  p->options.progress = background ? nullptr : options.progress;
  auto image = serialize_header(tensors, options.metadata);
  if (!image.ok()) return refusal(path, image.status());
  p->image = std::move(*image);
  if (options.refuse_overlapping) {
    Status s = check_overlaps(tensors, p->image.size_bytes);
    if (!s.ok()) return refusal(path, s);
  }
  const auto& gpu = seams.gpu ? *seams.gpu : ferry::detail::process_gpu_platform();
  auto devices = locate(tensors, p->image, gpu, &p->api);
  if (!devices.ok()) return refusal(path, devices.status());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (p->image.size_bytes[i] > 0 && tensors[i].data == nullptr) {
      return refusal(path, Status(ErrorCode::invalid_argument,
                                  fmt::format("tensor {} has no data for its {} bytes", quoted_text(tensors[i].name),
                                              p->image.size_bytes[i])));
    }
  }

  // The pieces of the image, in file order: the header, then every tensor with bytes.
  p->names.reserve(tensors.size());
  for (const SaveTensor& t : tensors) p->names.push_back(t.name);
  p->pieces.push_back(ImagePiece{0, p->image.bytes.size(), p->image.bytes.data(), -1, nullptr});
  for (std::size_t i : p->image.order) {
    if (p->image.size_bytes[i] == 0) continue;
    p->pieces.push_back(ImagePiece{p->image.bytes.size() + p->image.data_begin[i], p->image.size_bytes[i],
                                   tensors[i].data, (*devices)[i], &p->names[i]});
    if ((*devices)[i] >= 0 && p->staging_device < 0) p->staging_device = (*devices)[i];
  }
  p->windows = staging_windows(options, p->image.file_bytes(), background, p->api != nullptr, p->notes);

  if (options.config) {
    p->config = *options.config;
  } else {
    auto config = default_config();
    if (!config.ok()) return refusal(path, config.status());
    p->config = *config;
  }
  // Durable data goes to the disk anyway: O_DIRECT skips a copy into the page cache (measured on the GPU
  // machine: 1.9 against 1.5 GB/s with fdatasync). A scratch save (durable=false) writes the same way and
  // only skips the syncs, so that it is never the slower of the two: through the page cache, 2 GiB took
  // 6.6-9.5 s on the 2-core CPU machine against 0.9-1.7 s durable (growing the page cache there is slower
  // than the disk), and it evicts what other work had cached. direct_io=off asks for the page cache.
  if (p->config.direct_io() == DirectIo::automatic) {
    p->config.set_direct_io(DirectIo::on);
    p->notes.push_back(options.durable ? "direct_io=auto: O_DIRECT where aligned (a durable save)"
                                       : "direct_io=auto: O_DIRECT where aligned, without the syncs (durable=false)");
  }

  FERRY_ASSIGN_OR_RETURN(p->dest, ferry::detail::inspect_destination(path));
  FERRY_ASSIGN_OR_RETURN(auto temp, ferry::detail::TempFile::create(p->dest));
  if (!temp.removed_stale().empty()) {
    p->notes.push_back(fmt::format("removed {} temporary file(s) of earlier saves whose processes ended ({}, ...) "
                                   "from \"{}\"",
                                   temp.removed_stale().size(), temp.removed_stale().front(), p->dest.directory));
  }
  p->temp.emplace(std::move(temp));
  // Refused at once where the file system cannot hold the file (the target's old blocks stay in use until
  // the rename), rather than after most of it was written.
  struct statvfs fs {};
  const std::uint64_t need = p->image.file_bytes();
  if (::fstatvfs(p->temp->fd(), &fs) == 0 && fs.f_frsize > 0 &&
      static_cast<std::uint64_t>(fs.f_bavail) < need / fs.f_frsize) {
    return Status(ErrorCode::no_space,
                  fmt::format("Could not save \"{}\": it needs {} ({} bytes), and the file system holding \"{}\" has "
                              "{} free; \"{}\" is as it was",
                              path, format_size(need), need, p->dest.directory,
                              format_size(static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize), path),
                  ENOSPC, path);
  }
  FERRY_ASSIGN_OR_RETURN(auto file, p->temp->open_file(p->dest, p->config, &seams));
  p->file.emplace(std::move(file));
  return p;
}

std::string staging_note(const PreparedSave& p, const SaveStaging& staging, const ImageOutcome& o) {
  std::string note = fmt::format("staging: {} window(s) of {} in {}", staging.windows(), format_size(kSaveWindowBytes),
                                 staging.pinned() ? "pinned memory (GPU data copied with cuMemcpyDtoHAsync)"
                                                  : "host memory");
  if (staging.pinned_wait_ns() > 0) {
    note += fmt::format("; it waited {:.3f} s for room in pinned_budget", static_cast<double>(staging.pinned_wait_ns()) / 1e9);
  }
  if (o.snapshot_wait_seconds > 0) {
    note += fmt::format("; it holds less than the file ({}), so the snapshot waited {:.3f} s for writes to free "
                        "windows (max_staging_bytes sets it)",
                        format_size(p.image.file_bytes()), o.snapshot_wait_seconds);
  }
  return note;
}

// The save itself, on whichever thread runs it. `on_snapshot` runs once no tensor will be read again.
Result<SaveStats> run(PreparedSave& p, ImageSignals& signals, const std::function<void()>& on_snapshot) {
  SaveStats stats;
  stats.path = p.path;
  stats.target = p.dest.target;
  stats.replaced = p.dest.exists;
  stats.file_bytes = p.image.file_bytes();
  stats.tensors = p.names.size();
  stats.notes = p.notes;

  auto staging = SaveStaging::make(p.api, p.staging_device, p.windows);
  if (!staging.ok()) return refusal(p.path, staging.status());
  stats.staging_bytes = staging->bytes();
  stats.staging_pinned = staging->pinned();
  // The file has its final size before the data arrives, so that no O_DIRECT write extends it (ext4 runs
  // extending direct writes one at a time).
  if (::ftruncate(p.temp->fd(), static_cast<off_t>(stats.file_bytes)) != 0) {
    return Status::from_errno(errno, fmt::format("Could not save \"{}\": sizing the new file", p.path), p.path);
  }

  ImageOptions io;
  io.api = p.api;
  io.path = p.path;
  io.progress = p.options.progress;
  io.progress_interval = p.options.progress_interval;
  io.on_snapshot = [&] {
    stats.snapshot_seconds = ferry::detail::seconds_since(p.started_ns);
    if (on_snapshot) on_snapshot();
  };
  ImageOutcome outcome;
  Status written = write_image(*p.file, p.pieces, stats.file_bytes, *staging, signals, io, outcome);
  stats.report = std::move(outcome.report);
  stats.report.io.pinned_wait_ns += staging->pinned_wait_ns();
  stats.requests = outcome.requests;
  stats.device_bytes = outcome.device_bytes;
  stats.snapshot_wait_seconds = outcome.snapshot_wait_seconds;
  stats.notes.push_back(staging_note(p, *staging, outcome));
  FERRY_RETURN_IF_ERROR(written);

  if (p.options.durable) {
    auto t = ferry::detail::now_ns();
    Status synced = p.file->sync();
    if (!synced.ok()) return refusal(p.path, synced);
    stats.sync_seconds = ferry::detail::seconds_since(t);
  }
  Status closed = p.file->close();
  if (!closed.ok()) return refusal(p.path, closed);
  if (signals.cancel) {
    return Status(ErrorCode::cancelled, fmt::format("Saving \"{}\" was cancelled; \"{}\" is as it was", p.path, p.path));
  }
  auto t = ferry::detail::now_ns();
  FERRY_RETURN_IF_ERROR(p.temp->commit(p.dest, /*replace=*/true, /*sync_directory=*/p.options.durable));
  stats.commit_seconds = ferry::detail::seconds_since(t);
  stats.seconds = ferry::detail::seconds_since(p.started_ns);
  return stats;
}

}  // namespace

// Tensors whose bytes overlap would load as separate tensors: refused, as safetensors.torch refuses them.
Status check_overlaps(std::span<const SaveTensor> tensors, std::span<const std::uint64_t> sizes) {
  std::vector<std::size_t> by_address;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (sizes[i] > 0) by_address.push_back(i);
  }
  auto begin = [&](std::size_t i) { return reinterpret_cast<std::uintptr_t>(tensors[i].data); };
  std::sort(by_address.begin(), by_address.end(), [&](std::size_t a, std::size_t b) { return begin(a) < begin(b); });
  std::size_t reach = SIZE_MAX;  // the tensor reaching furthest so far
  for (std::size_t i : by_address) {
    if (reach != SIZE_MAX && begin(i) < begin(reach) + sizes[reach]) {
      return Status(ErrorCode::invalid_argument,
                    fmt::format("tensors {} and {} share memory: saved apart they would load as two separate "
                                "tensors. Save one of them (or a clone), or use save_sharded, which saves tensors "
                                "that are the same memory once",
                                quoted_text(tensors[reach].name), quoted_text(tensors[i].name)));
    }
    if (reach == SIZE_MAX || begin(i) + sizes[i] > begin(reach) + sizes[reach]) reach = i;
  }
  return Status();
}

// A background save: the thread's side.
class SaveJob {
 public:
  ImageSignals signals;
  std::uint64_t file_bytes = 0;

  void snapshot_taken() {
    std::lock_guard<std::mutex> lock(mutex_);
    snapshot_ = true;
    cv_.notify_all();
  }
  void finish(Result<SaveStats> r) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!snapshot_ && !r.ok()) snapshot_error_ = r.status();
    snapshot_ = true;
    result_.emplace(std::move(r));
    cv_.notify_all();
  }
  Status snapshot() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return snapshot_; });
    return snapshot_error_;
  }
  bool wait_snapshot_for(std::chrono::milliseconds t) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, t, [this] { return snapshot_; });
  }
  Result<SaveStats> result() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return result_.has_value(); });
    return *result_;
  }
  bool wait_for(std::chrono::milliseconds t) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, t, [this] { return result_.has_value(); });
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mutex_);
    return result_.has_value();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool snapshot_ = false;
  Status snapshot_error_;
  std::optional<Result<SaveStats>> result_;
};

// What the handles share: the job, and the thread, joined by the last handle once the job ended.
class SaveState {
 public:
  std::shared_ptr<SaveJob> job = std::make_shared<SaveJob>();
  std::thread thread;

  ~SaveState() {
    (void)job->result();
    if (thread.joinable()) thread.join();
  }
};

Result<SaveStats> save_with(const std::string& path, std::span<const SaveTensor> tensors, const SaveOptions& options,
                            const ferry::detail::OpenOptions& seams) {
  FERRY_ASSIGN_OR_RETURN(auto prepared, prepare(path, tensors, options, seams, /*background=*/false));
  ImageSignals signals;
  auto r = run(*prepared, signals, nullptr);
  if (r.ok()) r->seconds = ferry::detail::seconds_since(prepared->started_ns);
  return r;
}

Result<SaveHandle> start_save_with(const std::string& path, std::span<const SaveTensor> tensors,
                                   const SaveOptions& options, const ferry::detail::OpenOptions& seams) {
  FERRY_ASSIGN_OR_RETURN(auto prepared, prepare(path, tensors, options, seams, /*background=*/true));
  auto state = std::make_shared<SaveState>();
  state->job->file_bytes = prepared->image.file_bytes();
  std::shared_ptr<SaveJob> job = state->job;
  state->thread = std::thread([job, p = std::shared_ptr<PreparedSave>(std::move(prepared))]() mutable {
    auto r = run(*p, job->signals, [&job] { job->snapshot_taken(); });
    p.reset();  // the temporary file and the File go before the result is announced
    job->finish(std::move(r));
  });
  return SaveHandle(std::move(state));
}

}  // namespace detail

SaveHandle::SaveHandle(std::shared_ptr<detail::SaveState> state) : state_(std::move(state)) {}
SaveHandle::~SaveHandle() = default;

Status SaveHandle::snapshot() const { return state_->job->snapshot(); }
bool SaveHandle::wait_snapshot_for(std::chrono::milliseconds timeout) const {
  return state_->job->wait_snapshot_for(timeout);
}
Result<SaveStats> SaveHandle::result() const { return state_->job->result(); }
bool SaveHandle::wait_for(std::chrono::milliseconds timeout) const { return state_->job->wait_for(timeout); }
bool SaveHandle::done() const { return state_->job->done(); }
std::uint64_t SaveHandle::bytes_written() const { return state_->job->signals.written.load(); }
std::uint64_t SaveHandle::file_bytes() const { return state_->job->file_bytes; }
void SaveHandle::cancel() const { state_->job->signals.cancel = true; }

Result<SaveStats> save(const std::string& path, std::span<const SaveTensor> tensors, const SaveOptions& options) {
  return detail::save_with(path, tensors, options, ferry::detail::OpenOptions{});
}

Result<SaveHandle> start_save(const std::string& path, std::span<const SaveTensor> tensors,
                              const SaveOptions& options) {
  return detail::start_save_with(path, tensors, options, ferry::detail::OpenOptions{});
}

}  // namespace ferry::safetensors
