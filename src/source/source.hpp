// Where a file's bytes live: the one seam between the engine and storage.
//
// The engine (requests, the host and staged routes) moves tasks between a Source and host memory and never
// sees a descriptor; cuFile, which needs one, asks local_file(), and a source that is no local file is
// routed around cuFile with its own reason. PosixSource (posix_source.hpp) is a local file; the unit tests
// add an in-memory one (tests/support/memory_source.hpp) that the host and staged routes serve unchanged.
// Thread safety: read, write and read_batch are called from many worker threads at once; extent and sync
// from any thread; close once, after every request has stopped (FileState::close sees to that).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/direction.hpp"
#include "base/task.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

/// How far a read may go: the source's size now, when it has one Ferry can plan by.
struct Extent {
  bool known = true;
  std::uint64_t bytes = 0;
};

/// What a request tells its source, fixed when the request starts.
struct SourceRequest {
  Direction direction = Direction::read;
  Extent extent;            // reads: the size when the request began (a read goes no further)
  std::uint64_t bytes = 0;  // the request's size
  // True once the request was cancelled or one of its tasks failed (null: never). A source whose task can
  // wait long (a remote transfer) watches it and ends the task early with `cancelled`.
  std::shared_ptr<const std::atomic<bool>> stop;
};

/// What a source that is a local file offers beyond tasks: its descriptors.
struct LocalFile {
  int buffered_fd = -1;  // ordinary system calls (File::fileno: fstat, a buffered read)
  int direct_fd = -1;    // opened with O_DIRECT, or -1 where the file system refused it
  bool direct_io() const { return direct_fd >= 0; }
  /// The descriptor cuFile registers: the O_DIRECT one where there is one (its direct path wants it).
  int cufile_fd() const { return direct_io() ? direct_fd : buffered_fd; }
};

/// One task of a batch and where its bytes go.
struct TaskRead {
  Task task;
  void* dst = nullptr;
};

/// Where some of a task's bytes go: `length` bytes at `dst` (a task of a scattered read spans several).
struct MemoryPart {
  void* dst = nullptr;
  std::uint64_t length = 0;
};

class Source {
 public:
  virtual ~Source() = default;

  /// The path or URL, for messages.
  virtual const std::string& name() const = 0;
  /// The size now. Errors name the source.
  virtual Result<Extent> extent() const = 0;
  /// What the aligned body of a request's tasks must keep (offsets and lengths): 1 where nothing is needed.
  virtual std::uint64_t task_alignment() const = 0;

  /// Reads task `t` into host memory at `dst`. Returns the bytes read: fewer than t.length only where the
  /// data ends. I/O counters and notes go to `report`; errors name the source, the offset and `route_label`.
  virtual Result<std::uint64_t> read(const SourceRequest& request, const Task& t, void* dst, const char* route_label,
                                     Report& report) = 0;
  /// Reads task `t` into host memory at several places: its first parts[0].length bytes to parts[0].dst, and
  /// so on (the lengths add up to t.length). Answers as read(). The default reads each part on its own.
  virtual Result<std::uint64_t> read_parts(const SourceRequest& request, const Task& t,
                                           std::span<const MemoryPart> parts, const char* route_label,
                                           Report& report) {
    std::uint64_t done = 0;
    for (const MemoryPart& part : parts) {
      const Task piece{t.file_offset + done, part.length, t.buffer_offset + done, false};
      FERRY_ASSIGN_OR_RETURN(std::uint64_t n, read(request, piece, part.dst, route_label, report));
      done += n;
      if (n < part.length) break;  // the data ends here
    }
    return done;
  }
  /// Writes task `t` from host memory at `src`. Errors as read's (no_space for ENOSPC).
  virtual Status write(const SourceRequest& request, const Task& t, const void* src, const char* route_label,
                       Report& report) = 0;

  /// How many of a request's tasks run at once when the source decides it (a remote object: one per
  /// connection, Config::remote().connections); 0: Config::threads.
  virtual unsigned parallel_tasks() const { return 0; }
  /// How many tasks read_batch takes at once to keep them in flight together; 1 means one at a time.
  virtual std::size_t queue_depth() const { return 1; }
  /// Reads several tasks; results[i] is what read() would answer for reads[i]. The default reads them one
  /// after another; an engine with a queue (io_uring) keeps them in flight together.
  virtual void read_batch(const SourceRequest& request, std::span<const TaskRead> reads, const char* route_label,
                          Report& report, std::span<Result<std::uint64_t>> results) {
    for (std::size_t i = 0; i < reads.size(); ++i) results[i] = read(request, reads[i].task, reads[i].dst, route_label, report);
  }

  /// Whether a read of `length` bytes is expected to come from memory, without waiting for a device (a
  /// small read of a local file whose small reads keep finding their pages cached). Several such reads share
  /// a worker of the engine (engine/queue.hpp); reads that wait for a disk or a network are better kept
  /// apart, in flight together. False when the source cannot say.
  virtual bool reads_from_memory(std::uint64_t /*length*/) const { return false; }
  /// Makes what was written durable.
  virtual Status sync() = 0;
  /// The local file behind the source, or nullopt (a remote object, memory): then cuFile cannot serve it,
  /// File::fileno is -1 and no O_DIRECT is open.
  virtual std::optional<LocalFile> local_file() const { return std::nullopt; }
  /// What opening found worth saying (an O_DIRECT open refused, ...), or empty.
  virtual const std::string& open_note() const = 0;
  /// A line for each request's report about the source's own work (a remote object's requests, retries
  /// and connections), or empty.
  virtual std::string activity_note() const { return {}; }
  /// Releases descriptors or connections. Nothing else is called afterwards.
  virtual Status close() = 0;
};

}  // namespace ferry::detail
