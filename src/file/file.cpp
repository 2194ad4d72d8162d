// File and Future: the public facade over FileState and RequestState.
#include "ferry/file.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "base/fork_guard.hpp"
#include "engine/task_split.hpp"
#include "engine/thread_pool.hpp"
#include "file/file_state.hpp"
#include "file/route_selection.hpp"
#include "file/stream_order.hpp"
#include "platform/nvtx/nvtx.hpp"
#include "remote/remote_source.hpp"
#include "source/posix_source.hpp"

namespace ferry {
namespace detail {

FileState::FileState(std::string path_in, Config config_in, std::shared_ptr<Source> source_in, OpenFlags flags_in,
                     bool append_in, const GpuPlatform* gpu_in)
    : path(std::move(path_in)),
      config(std::move(config_in)),
      source(std::move(source_in)),
      flags(flags_in),
      append(append_in),
      gpu(gpu_in),
      part_(new ProcessPart(fork_generation())) {
  ProcessPart& p = *part_.load();
  if (append) {
    auto extent = source->extent();
    p.position = extent.ok() ? extent->bytes : 0;
  }
  if (!source->open_note().empty()) p.report.add_note(source->open_note());
}

FileState::ProcessPart& FileState::part() const {
  return this_process_part(part_, [](const ProcessPart& parents, std::uint64_t generation) {
    auto* own = new ProcessPart(generation);  // read without the parent's locks: nothing writes it here
    own->closed = parents.closed.load();      // a File the parent closed stays closed
    own->position = parents.position;
    return own;
  });
}

Result<FileState::Use> FileState::use() {
  ProcessPart& p = part();
  p.uses_begun.fetch_add(1);
  if (p.closed.load()) {
    end_use(&p);
    return Status(ErrorCode::failed_precondition, fmt::format("\"{}\" is closed", path), EBADF, path);
  }
  return Use(this, &p);
}

namespace {

// close()'s wait for a File's uses to end. Process-wide and never destroyed: the File may be gone the moment a
// use's end is counted (close() may have waited for that one alone), so the wake after the count touches only
// these. The lock is held across fork() (a leaf: nothing else is taken under it).
std::mutex g_use_end_mutex;
const bool g_use_end_mutex_forks = (hold_across_fork(g_use_end_mutex), true);
std::atomic<unsigned> g_closers{0};  // close() calls waiting for uses to end, in any File
std::atomic<std::condition_variable*> g_use_ended{nullptr};  // notified under g_use_end_mutex
std::condition_variable& use_ended() {
  return made_once(g_use_ended, [] { return new std::condition_variable(); });
}

}  // namespace

void FileState::end_use(ProcessPart* part_of_use) {
  ProcessPart& p = part();
  if (part_of_use != &p) return;  // a use of the parent's, which never ends here
  p.uses_ended.fetch_add(1);  // the last touch of this File: it may be gone from here on
  // close() counts itself among the closers before it reads the counts, this the other way round (both
  // sequentially consistent): either it sees this end or this sees it waiting.
  if (g_closers.load() == 0) return;
  std::lock_guard<std::mutex> lock(g_use_end_mutex);
  use_ended().notify_all();
}

Status FileState::close() {
  {
    ProcessPart& p = part();
    if (p.closed.exchange(true)) return Status();
    // The uses are this process's: a child forked while the parent had requests in flight does not wait for
    // them, since they never end here (a DataLoader worker whose Dataset closes the File it inherited hung).
    if (ThreadPool::on_worker_thread()) {
      // A close() inside a completion callback: the requests it waits for may be queued behind this very
      // worker, so run them instead of blocking it.
      while (p.uses_in_flight() > 0) {
        if (!shared_pool().help_one()) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    } else if (p.uses_in_flight() > 0) {
      g_closers.fetch_add(1);
      {
        std::unique_lock<std::mutex> lock(g_use_end_mutex);
        use_ended().wait(lock, [&p] { return p.uses_in_flight() == 0; });
      }
      g_closers.fetch_sub(1);
    }
  }
  // Nothing uses the descriptors now and nothing can start to. cuFile keys registrations by descriptor:
  // deregister before the number can be reused by another open.
  {
    std::lock_guard<std::mutex> lock(gds_mutex);
    gds.reset();
  }
  return source->close();
}

Report FileState::report() const {
  ProcessPart& p = part();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.report;
}

namespace {

// Why `name` could not be opened: a bad mode or setting.
Status open_error(const std::string& name, const Status& why) {
  return Status(ErrorCode::invalid_argument, fmt::format("Could not open \"{}\": {}", name, why.message()), 0, name);
}

}  // namespace

Status FileState::check_request(Direction direction, const void* buffer, std::uint64_t size,
                                std::uint64_t offset) const {
  const bool reading = is_read(direction);
  if (flags.access == (reading ? AccessMode::write_only : AccessMode::read_only)) {
    return Status(ErrorCode::failed_precondition,
                  fmt::format("Could not {} \"{}\": it was opened for {}", reading ? "read" : "write", path,
                              reading ? "writing only" : "reading only (mode \"r\")"),
                  EBADF, path);
  }
  if (size > 0 && buffer == nullptr) {
    return Status(ErrorCode::invalid_argument, fmt::format("null buffer for {} bytes of \"{}\"", size, path), 0,
                  path);
  }
  // Every offset Ferry hands the kernel is an off_t: a range must end at or below its largest value.
  constexpr std::uint64_t kMaxOffset = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());
  if (offset <= kMaxOffset && size <= kMaxOffset - offset) return Status();
  return Status(ErrorCode::invalid_argument,
                fmt::format("Could not {} {} bytes at offset {} {} \"{}\": the range ends past the largest file "
                            "offset ({})",
                            reading ? "read" : "write", size, offset, reading ? "from" : "to", path, kMaxOffset),
                EINVAL, path);
}

void FileState::add_to_report(const Report& report) {
  ProcessPart& p = part();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.report.merge(report);
}

Result<Extent> FileState::extent_for(Direction direction, std::uint64_t offset, std::uint64_t& size,
                                     std::string_view planned) {
  if (!is_read(direction)) return Extent{};
  FERRY_ASSIGN_OR_RETURN(Extent extent, source->extent());
  if (extent.known) {
    size_seen_.store(extent.bytes, std::memory_order_relaxed);  // for submit()'s plan made before the size
    size = offset >= extent.bytes ? 0 : std::min(size, extent.bytes - offset);
  } else if (!planned.empty()) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("Could not read {} from \"{}\": it has no size to plan by (a /proc file or a "
                              "character device); read it with pread",
                              planned, path),
                  EINVAL, path);
  }
  return extent;
}

Future FileState::submit(Direction direction, void* buffer, std::uint64_t size, std::uint64_t offset,
                         std::shared_ptr<PositionReservation> at_position) {
  if (Status s = check_request(direction, buffer, size, offset); !s.ok()) return done_future(s);
  auto in_use = use();
  if (!in_use.ok()) return done_future(in_use.status());
  const SetupMark setup_before = setup_mark();
  const bool reading = is_read(direction);
  // A one-task read into GPU memory through bounce buffers, inside the size the File saw last, needs no size
  // of its own (no fstat): a short read is then where the data ends (one version of the file either way), and
  // the bounce buffers keep the destination clear of anything an O_DIRECT read brings in past that.
  std::optional<RoutePlanDetail> early_plan;  // the decision for `size`, made before the size was asked for
  const std::uint64_t early_size = size;
  if (const std::uint64_t seen = size_seen_.load(std::memory_order_relaxed);
      reading && size > 0 && offset < seen && size <= seen - offset) {
    auto plan = route_for(*this, buffer, size);
    if (!plan.ok()) return done_future(plan.status());
    if (plan->decision.route == Route::staged && !plan->buffer.is_host()) {
      if (auto task = only_task(offset, size, config.task_size(), source->task_alignment())) {
        return start(direction, Destination(buffer), offset, std::span<const Task>(&*task, 1), Extent{true, seen},
                     /*short_task_ends_request=*/true, std::move(*plan), std::move(*in_use), setup_before, 0,
                     std::move(at_position));
      }
    }
    early_plan = std::move(*plan);
  }
  // A read covers the file as it is now and no further: nothing past its end is ever asked for, so no
  // byte of the buffer past the returned count is written. A file without a size (a /proc file, a
  // character device) is read front to back in one task, which stops where the data does.
  auto covered = extent_for(direction, offset, size);
  if (!covered.ok()) return done_future(covered.status());
  const Extent extent = *covered;
  std::vector<Task> tasks;
  if (extent.known) {
    tasks = split_request(offset, size, config.task_size(), source->task_alignment());
  } else if (size > 0) {
    tasks.push_back(Task{offset, size, 0, false});
  }
  auto plan = early_plan && size == early_size ? Result<RoutePlanDetail>(std::move(*early_plan))
                                               : route_for(*this, buffer, size);
  if (!plan.ok()) return done_future(plan.status());
  return start(direction, Destination(buffer), offset, tasks, extent, /*short_task_ends_request=*/!extent.known,
               std::move(*plan), std::move(*in_use), setup_before, 0, std::move(at_position));
}

Future FileState::start(Direction direction, const Destination& destination, std::uint64_t offset,
                        std::span<const Task> tasks, Extent extent, bool short_task_ends_request, RoutePlanDetail plan,
                        Use in_use, SetupMark setup_before, std::size_t batch_pieces,
                        std::shared_ptr<PositionReservation> at_position) {
  const bool reading = is_read(direction);
  std::uint64_t size = 0;  // what the tasks cover: no further than the file's end
  for (const Task& t : tasks) size += t.length;
  const BufferKind buffer = plan.buffer;
  const CudaApi* cuda = plan.cuda;
  // Only a source whose task can wait long (a remote transfer) watches for a stop mid-task.
  auto stop = source->local_file() ? nullptr : std::make_shared<std::atomic<bool>>(false);
  SourceRequest request{direction, extent, size, stop};
  auto backend =
      make_route_backend(*this, request, std::move(plan), destination, batch_pieces > 0 ? 0 : size, tasks);
  if (!backend.ok()) return done_future(backend.status());
  // Failed requests count too: their operations, notes and I/O counters belong to the file's trail. The
  // Use ends in on_complete, before the future is done (close() may be called from its callbacks); until then
  // it keeps this FileState and its source, and the completion takes no reference of its own (docs/engine.md).
  ProcessPart* part_of_use = std::move(in_use).hand_over();
  // Nsight Systems: one range per request, from here to its completion (on whichever thread that is).
  std::uint64_t nvtx_range = 0;
  if (config.nvtx() && nvtx::attached()) {
    const std::string label =
        batch_pieces > 0
            ? fmt::format("ferry read_batch of {} pieces, {} from \"{}\"", batch_pieces, format_size(size), path)
            : fmt::format("ferry {} {} at offset {} {} \"{}\"", reading ? "read" : "write", format_size(size), offset,
                          reading ? "from" : "to", path);
    nvtx_range = nvtx::range_start(label.c_str());
  }
  auto on_complete = [this, part_of_use, setup_before, nvtx_range, reading, at_position = std::move(at_position)](
                         Report& report, const Status& status, std::uint64_t bytes) {
    nvtx::range_end(nvtx_range);
    if (at_position) {  // a write that succeeds moved every byte
      settle_position(*part_of_use, *at_position, !status.ok() ? 0 : reading ? bytes : at_position->size);
    }
    // The one-time work done while this request ran (all of it, in a fresh process's first request).
    if (std::string note = setup_note_since(setup_before); !note.empty()) report.add_note(note);
    if (std::string note = source->activity_note(); !note.empty()) report.add_note(note);
    add_to_report(report);
    end_use(part_of_use);
  };
  auto queue = queue_for(**backend, buffer.device);
  auto state = RequestState::start(tasks, std::move(*backend), std::move(queue), parallel_tasks(),
                                   EndOfFileRule{short_task_ends_request, &path, extent.bytes}, std::move(on_complete),
                                   nvtx_range != 0, std::move(stop));
  if (batch_pieces == 0 && buffer.kind == MemoryKind::device && cuda != nullptr) {
    std::lock_guard<std::mutex> lock(allocation_mutex_);
    allocation_in_flight_ = AllocationInFlight{state, buffer, cuda};
  }
  return Future(std::move(state));
}

std::optional<BufferKind> FileState::allocation_in_flight(const CudaApi* cuda, const void* buffer,
                                                          std::uint64_t size) {
  if (cuda == nullptr) return std::nullopt;  // no CUDA here: nothing was noted, and no lock is taken
  std::lock_guard<std::mutex> lock(allocation_mutex_);
  const AllocationInFlight& last = allocation_in_flight_;
  if (last.cuda != cuda ||
      !last.buffer.holds(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(buffer)), size)) {
    return std::nullopt;
  }
  const auto request = last.request.lock();
  if (!request || request->completed()) return std::nullopt;
  return last.buffer;
}

std::shared_ptr<OpQueue> FileState::queue_for(const RouteBackend& backend, int device) {
  if (!backend.shares_workers()) return nullptr;
  ProcessPart& p = part();  // a forked child's queues are its own: the parent's drainers are not there
  const Route route = backend.decision().route;
  std::lock_guard<std::mutex> lock(p.queues_mutex);
  for (const auto& [key, queue] : p.queues) {
    if (key.first == route && key.second == device) return queue;
  }
  p.queues.emplace_back(std::make_pair(route, device), std::make_shared<OpQueue>(parallel_tasks()));
  return p.queues.back().second;
}

Future FileState::at_position(Direction direction, void* buffer, std::uint64_t size) {
  // Held while the size is asked for (mode "a"): a closed File fails here, before anything is reserved.
  auto in_use = use();
  if (!in_use.ok()) return done_future(in_use.status());
  // Mode "a": a write lands at the end of the file as it is now, not as it was at open: bytes added since
  // (by pwrite() or another writer) must not be overwritten.
  std::uint64_t size_now = 0;
  if (!is_read(direction) && append) {
    auto extent = source->extent();
    if (extent.ok()) size_now = extent->bytes;
  }
  auto reservation = std::make_shared<PositionReservation>();
  reservation->size = size;
  ProcessPart& p = part();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    p.position = std::max(p.position, size_now);
    reservation->at = std::exchange(p.position, p.position + size);
  }
  Future future = submit(direction, buffer, size, reservation->at, reservation);
  // Failed before it started (a closed File, a refused buffer or range, no route): no completion settles it, and
  // it moved nothing. A request that started settled before it was done.
  if (future.done()) settle_position(p, *reservation, 0);
  return future;
}

void FileState::settle_position(ProcessPart& p, PositionReservation& r, std::uint64_t moved) {
  std::lock_guard<std::mutex> lock(p.mutex);
  if (std::exchange(r.settled, true) || moved == r.size) return;
  if (p.position == r.at + r.size) p.position = r.at + moved;
}

std::uint64_t FileState::position() const {
  ProcessPart& p = part();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.position;
}

void FileState::set_position(std::uint64_t to) {
  ProcessPart& p = part();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.position = to;
}

Result<File> open_file(const std::string& path, std::string_view mode, const Config& config,
                       const OpenOptions& options) {
  bool append = false;
  auto flags = parse_open_mode(mode, &append);
  if (!flags.ok()) return open_error(path, flags.status());
  std::shared_ptr<Source> source;
  if (remote::is_remote_url(path)) {
    FERRY_ASSIGN_OR_RETURN(source, open_remote_source(path, mode, config.remote()));
  } else {
    const std::string& name = options.name.empty() ? path : options.name;
    FERRY_ASSIGN_OR_RETURN(FileDescriptors fds, FileDescriptors::open(*options.syscalls, path, *flags, name));
    source = std::make_shared<PosixSource>(*options.syscalls, std::move(fds), name, config.direct_io(),
                                           config.io_engine());
  }
  return open_source(std::move(source), mode, config, options);
}

Result<File> open_source(std::shared_ptr<Source> source, std::string_view mode, const Config& config,
                         const OpenOptions& options) {
  bool append = false;
  auto flags = parse_open_mode(mode, &append);
  if (!flags.ok()) return open_error(source->name(), flags.status());
  std::string name = source->name();
  auto state = std::make_shared<FileState>(std::move(name), config, std::move(source), *flags, append, options.gpu);
  return FileState::make_file(std::move(state));
}

}  // namespace detail

// The front door for URLs with credentials: a File over the remote source (in a build without remote
// objects, open_remote_source says why not).
Result<File> remote::open(const std::string& url, const remote::Credentials& credentials, const Config& config,
                          std::string_view mode) {
  FERRY_ASSIGN_OR_RETURN(auto source, detail::open_remote_source(url, mode, config.remote(), &credentials));
  return detail::open_source(std::move(source), mode, config, detail::OpenOptions{});
}

// ---- Future ----

Future::Future(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {}

bool Future::done() const { return state_ && state_->done(); }

void Future::wait() const {
  if (state_) state_->wait();
}

bool Future::wait_for(std::chrono::milliseconds timeout) const { return !state_ || state_->wait_for(timeout); }

std::uint64_t Future::bytes_done() const { return state_ ? state_->bytes_done() : 0; }

Result<Transfer> Future::get() {
  if (!state_) return Status(ErrorCode::failed_precondition, "get() on an empty Future");
  auto state = std::move(state_);
  return state->take_result();
}

void Future::cancel() {
  if (state_) state_->cancel();
}

void Future::then(std::function<void(const Result<Transfer>&)> callback) {
  if (state_) state_->then(std::move(callback));
}

// ---- File ----

File::File(std::shared_ptr<detail::FileState> state) : state_(std::move(state)) {}
File::File(File&&) noexcept = default;
File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (state_) (void)state_->close();  // as the destructor: the File replaced here is closed first
    state_ = std::move(other.state_);
  }
  return *this;
}
// Destroying a File closes it as close() does: after the requests in flight on it have finished, so that
// no task runs on descriptors (or on a FileState) that are going away.
File::~File() {
  if (state_) (void)state_->close();
}

Result<File> File::open(const std::string& path, std::string_view mode) {
  auto config = default_config();
  if (!config.ok()) return detail::open_error(path, config.status());
  return open(path, mode, *config);
}

Result<File> File::open(const std::string& path, std::string_view mode, const Config& config) {
  return detail::open_file(path, mode, config, detail::OpenOptions{});
}

Result<std::uint64_t> File::size() const {
  FERRY_ASSIGN_OR_RETURN(auto in_use, state_->use());
  FERRY_ASSIGN_OR_RETURN(detail::Extent extent, state_->source->extent());
  return extent.bytes;  // 0 for a source without a size
}

Future File::pread(void* buffer, std::uint64_t size, std::uint64_t offset) {
  return state_->submit(detail::Direction::read, buffer, size, offset);
}

Future File::pread_batch(std::span<const Piece> pieces) { return state_->submit_batch(pieces); }

Future File::pwrite(const void* buffer, std::uint64_t size, std::uint64_t offset) {
  return state_->submit(detail::Direction::write, const_cast<void*>(buffer), size, offset);
}

Future File::read_async(void* buffer, std::uint64_t size, std::uint64_t offset, void* stream) {
  return detail::submit_on_stream(*state_, detail::Direction::read, buffer, size, offset, stream);
}

Future File::write_async(const void* buffer, std::uint64_t size, std::uint64_t offset, void* stream) {
  return detail::submit_on_stream(*state_, detail::Direction::write, const_cast<void*>(buffer), size, offset, stream);
}

Result<Transfer> File::read(void* buffer, std::uint64_t size) { return read_at_position(buffer, size).get(); }

Result<Transfer> File::write(const void* buffer, std::uint64_t size) { return write_at_position(buffer, size).get(); }

Future File::read_at_position(void* buffer, std::uint64_t size) {
  return state_->at_position(detail::Direction::read, buffer, size);
}

Future File::write_at_position(const void* buffer, std::uint64_t size) {
  return state_->at_position(detail::Direction::write, const_cast<void*>(buffer), size);
}

std::uint64_t File::tell() const { return state_->position(); }

void File::seek(std::uint64_t position) { state_->set_position(position); }

// Reads and writes take the same routes: the direction does not enter the decision.
Result<RoutePlan> File::prepare(const void* buffer, std::uint64_t size, Direction /*direction*/) {
  FERRY_ASSIGN_OR_RETURN(auto in_use, state_->use());
  FERRY_ASSIGN_OR_RETURN(detail::RoutePlanDetail plan, detail::prepare_route(*state_, buffer, size));
  return RoutePlan{plan.decision.route, plan.decision.reason, plan.decision.detail,
                   detail::memory_kind_name(plan.buffer.kind), plan.buffer.device};
}

Status File::sync() {
  FERRY_ASSIGN_OR_RETURN(auto in_use, state_->use());
  return state_->source->sync();
}

Status File::close() { return state_->close(); }

const std::string& File::path() const { return state_->path; }
int File::fileno() const {
  if (state_->is_closed()) return -1;
  auto local = state_->source->local_file();
  return local ? local->buffered_fd : -1;
}
const Config& File::config() const { return state_->config; }
Report File::report() const { return state_->report(); }
bool File::direct_io_available() const {
  auto local = state_->source->local_file();
  return local && local->direct_io();
}
const std::string& File::direct_io_note() const { return state_->source->open_note(); }

}  // namespace ferry
