// The shared state behind a File: its source, settings, position and the File's report. Everything that
// touches the source holds a Use; close() (~File's too) waits until none is held, so a descriptor is never
// closed (and its number handed to another file) under a running task, and a FileState outlives every Use.
// Thread safety: every member may be called from any thread at once: uses and closing are atomics of the
// ProcessPart, the report and the position are guarded by its mutex, the cuFile state by gds_mutex; the
// rest never changes after opening.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "base/destination.hpp"
#include "base/setup_ledger.hpp"
#include "engine/queue.hpp"
#include "engine/request.hpp"
#include "ferry/file.hpp"
#include "file/open_options.hpp"
#include "platform/cuda/buffer_kind.hpp"
#include "source/file_descriptors.hpp"
#include "source/source.hpp"

namespace ferry::detail {

struct GdsFileState;  // route_selection.cpp: what cuFile said about this file, and its handle
struct RoutePlanDetail;  // route_selection.hpp: a request's route decision and what it was made from

/// The bytes a request at the file position reserved (FileState::at_position). Its completion, before anyone
/// can see it done, pulls the position back to where the bytes moved end (a short read ends where the data did;
/// a write that succeeds moved every byte; a failed or cancelled request moved none), unless another call moved
/// it since.
struct PositionReservation {
  std::uint64_t at = 0;
  std::uint64_t size = 0;
  bool settled = false;  // guarded by the part's mutex
};

/// A Future that is done already: a request refused before it started, or one with nothing to move.
inline Future done_future(Result<Transfer> result) { return Future(RequestState::ready(std::move(result))); }

class FileState : public std::enable_shared_from_this<FileState> {
 public:
  FileState(std::string path, Config config, std::shared_ptr<Source> source, OpenFlags flags, bool append,
            const GpuPlatform* gpu);
  ~FileState() { delete part_.load(); }
  FileState(const FileState&) = delete;
  FileState& operator=(const FileState&) = delete;

  static File make_file(std::shared_ptr<FileState> state) { return File(std::move(state)); }
  /// The state behind a File (for `ferry doctor`, which asks the router about an open file).
  static FileState& of(const File& file) { return *file.state_; }

  /// What a request at `offset` covers: for a read, the file as it is now, `size` cut at its end where it has
  /// one; a write's extent is unknown and its size kept. `planned`: what a read that must plan by a size is
  /// (a batch, a scattered read), for the invalid_argument a file without one gets: "Could not read <planned>
  /// from <path>: it has no size to plan by (...); read it with pread" (a /proc file, a character device).
  Result<Extent> extent_for(Direction direction, std::uint64_t offset, std::uint64_t& size,
                            std::string_view planned = {});
  /// Tasks one request may run at once: the source's own limit (a remote object's connections), else `threads`.
  unsigned parallel_tasks() const {
    return source->parallel_tasks() != 0 ? source->parallel_tasks() : config.threads();
  }

  // What belongs to the process that made it: a child of fork() starts its own (docs/engine.md, "After
  // fork()"), with the position and end where the parent left them.
  struct ProcessPart {
    explicit ProcessPart(std::uint64_t generation_in) : generation(generation_in) {}
    const std::uint64_t generation;  // fork_generation() of the process it belongs to
    // Uses are counted without a lock, begun (by the submitter) and ended (by the worker) apart, each on a cache
    // line of its own. close() sets `closed` and then reads the counts, use() counts and then reads `closed`
    // (all sequentially consistent): one of them sees the other. close() waits on a process-wide wake
    // (file.cpp): a use's end touches nothing of the File after its count.
    std::atomic<bool> closed{false};
    alignas(64) std::atomic<std::uint64_t> uses_begun{0};
    alignas(64) std::atomic<std::uint64_t> uses_ended{0};
    // The workers' part: each request's operations join the report as it completes.
    alignas(64) std::mutex mutex;
    Report report;              // guarded by mutex
    std::uint64_t position = 0;  // guarded by mutex; in mode "a", where the next write() appends at the earliest
    // The submitters' part.
    alignas(64) std::mutex queues_mutex;
    std::vector<std::pair<std::pair<Route, int>, std::shared_ptr<OpQueue>>> queues;  // guarded by queues_mutex

    /// Uses begun and not yet ended. The ends are read first: a use that began after closing ends at once, and
    /// counting its end but not its beginning would hide one still running.
    std::uint64_t uses_in_flight() const {
      const std::uint64_t ended = uses_ended.load();
      return uses_begun.load() - ended;
    }
  };

  /// Keeps the descriptors open while held. Errors: failed_precondition once close() began. A use belongs to
  /// the process that took it (end_use).
  class Use {
   public:
    Use(FileState* state, ProcessPart* part) : state_(state), part_(part) {}
    Use(Use&& o) noexcept : state_(std::exchange(o.state_, nullptr)), part_(o.part_) {}
    Use& operator=(Use&&) = delete;
    ~Use() {
      if (state_) state_->end_use(part_);
    }
    /// For a request's completion, which ends the use itself (end_use) and always runs: the part to end it in.
    ProcessPart* hand_over() && {
      state_ = nullptr;
      return part_;
    }

   private:
    FileState* state_;
    ProcessPart* part_;  // the part of the process that took it
  };
  [[nodiscard]] Result<Use> use();

  /// A read or write of `size` bytes at `offset`; `at_position`: the position's reservation it settles (at_position).
  Future submit(Direction direction, void* buffer, std::uint64_t size, std::uint64_t offset,
                std::shared_ptr<PositionReservation> at_position = nullptr);
  /// File::pread_batch (file/batch.cpp).
  Future submit_batch(std::span<const Piece> pieces);
  /// Reads `size` bytes at `offset` into several buffers (file/batch.cpp): `segments` say where
  /// each part of the request goes (Destination::scattered), all host memory or all device memory of one
  /// GPU. The tasks are a plain read's, each task's bytes copied to the buffers it covers; cuFile's each lie
  /// in one segment. Errors as pread's, and invalid_argument (naming the segment) for segments that do not
  /// follow one another from offset 0, a null address, or memory of another kind or GPU than the first's.
  Future submit_scattered(std::vector<Segment> segments, std::uint64_t offset);
  /// Starts the tasks of a request at `offset` (covering the file as `extent` says) on the backend of the route
  /// `plan` chose, on queue_for()'s queue, holding `in_use` until it completes, and accounts for it in the
  /// File's report. `short_task_ends_request`: a short task is where the data ends (a file without a size, or
  /// a read planned by the size seen before), not a file that shrank. `batch_pieces`: the pieces of a batch,
  /// whose tasks carry their addresses (`destination` has base 0); 0 for any other request. `at_position`: as
  /// submit()'s.
  Future start(Direction direction, const Destination& destination, std::uint64_t offset, std::span<const Task> tasks,
               Extent extent, bool short_task_ends_request, RoutePlanDetail plan, Use in_use,
               SetupMark setup_before, std::size_t batch_pieces = 0,
               std::shared_ptr<PositionReservation> at_position = nullptr);
  /// The queue of this file's requests on `backend`'s route to GPU `device`, shared by every request whose
  /// backend shares workers; null for one that does not (its ops get a queue of their own).
  std::shared_ptr<OpQueue> queue_for(const RouteBackend& backend, int device);
  /// The classification of [buffer, buffer + size) without asking the driver, where it lies in the GPU
  /// allocation of a request still in flight (noted by start(), for any request but a batch): that allocation
  /// cannot have been freed meanwhile (that would be the caller's use after free whatever Ferry did), so it is
  /// the same memory of the same GPU. nullopt otherwise: ask the driver.
  std::optional<BufferKind> allocation_in_flight(const CudaApi* cuda, const void* buffer, std::uint64_t size);
  /// What submit() refuses before any I/O: the File's mode, a null buffer, a range past the largest offset.
  Status check_request(Direction direction, const void* buffer, std::uint64_t size, std::uint64_t offset) const;
  /// Adds a request's operations to the File's report (requests do this themselves as they complete).
  void add_to_report(const Report& report);
  /// File::close(): waits for every Use (requests in flight on any thread, size(), sync()) to end, then
  /// deregisters the file from cuFile and closes the source.
  Status close();
  /// True once close() began.
  bool is_closed() { return part().closed.load(); }
  /// File::read_at_position and write_at_position: a request at the position (for a write in mode "a", at the
  /// end of the file as it is now, if that is further), which it reserves and moves past; it settles as
  /// PositionReservation says.
  Future at_position(Direction direction, void* buffer, std::uint64_t size);
  /// File::tell and File::seek.
  std::uint64_t position() const;
  void set_position(std::uint64_t to);

  const std::string path;
  const Config config;
  const std::shared_ptr<Source> source;  // the requests' backends and workers point to it while a use is held
  const OpenFlags flags;
  const bool append;
  const GpuPlatform* const gpu;  // nullptr until a device buffer needs it (then the process's platform)

  Report report() const;

  // Filled by route selection on the first device request that may use cuFile; guarded by gds_mutex.
  std::mutex gds_mutex;
  std::shared_ptr<GdsFileState> gds;

 private:
  // Settles `r` in `p` (the part that reserved it), `moved` bytes of it moved; once only.
  static void settle_position(ProcessPart& p, PositionReservation& r, std::uint64_t moved);

  // Ends a Use's use: one taken by an earlier process (`part` is not this process's) was never counted here and
  // is ignored.
  void end_use(ProcessPart* part);

  // This process's part: in a forked child's first use, a new one.
  ProcessPart& part() const;

  mutable std::atomic<ProcessPart*> part_;
  std::atomic<std::uint64_t> size_seen_{0};  // the source's size when a read last asked (0: not yet)
  // The newest request into GPU memory and its destination's allocation (allocation_in_flight).
  struct AllocationInFlight {
    std::weak_ptr<RequestState> request;
    BufferKind buffer;
    const CudaApi* cuda = nullptr;
  };
  std::mutex allocation_mutex_;
  AllocationInFlight allocation_in_flight_;  // guarded by allocation_mutex_
};

}  // namespace ferry::detail
