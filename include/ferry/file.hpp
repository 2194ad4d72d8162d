// ferry/file.hpp: reading and writing a file from and into host or GPU memory.
//
// A request is split into tasks of Config::task_size that run in parallel on Ferry's thread pool; each
// task is one operation in the route report. Buffers may be host memory (pageable or pinned) or device
// memory (a CUdeviceptr cast to void*); Ferry classifies them itself.
// Thread safety: a File may be read, written and closed from many threads at once: close() waits for
// the requests in flight on the File to finish, and later calls fail with failed_precondition.
// Destroying a File closes it, waiting as close() does for the requests in flight on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "ferry/config.hpp"
#include "ferry/direction.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry {

namespace detail {
class RequestState;
class FileState;
struct FutureAccess;
}  // namespace detail

/// The pending result of pread/pwrite. It completes when every task of the request has stopped: after
/// an error no task still writes into the buffer. Move-only; get() may be called once.
class [[nodiscard]] Future {
 public:
  Future() = default;
  explicit Future(std::shared_ptr<detail::RequestState> state);

  bool valid() const noexcept { return state_ != nullptr; }
  /// True once every task has stopped.
  bool done() const;
  /// Blocks until done. Called from a Ferry worker (inside a completion callback), it runs queued tasks
  /// while it waits instead of blocking a worker, so nested reads cannot deadlock the pool.
  void wait() const;
  /// Waits at most `timeout`; returns done().
  bool wait_for(std::chrono::milliseconds timeout) const;
  /// Bytes moved so far by the request's finished tasks (for progress displays); the total once done.
  std::uint64_t bytes_done() const;
  /// Waits, then returns bytes and report, or the first error of any task (its message names the file,
  /// the offset and the cause).
  Result<Transfer> get();
  /// Asks the request to stop: no task starts after this, tasks already running finish, and get() then
  /// returns `cancelled` (unless the request had already completed or failed). Does not wait; the
  /// buffer is in use until done(). After a cancelled read the buffer's contents are unspecified.
  void cancel();
  /// Runs `callback` once the request is done (at once when it already is), on a Ferry worker thread or
  /// on the calling thread. The callback may issue and wait for further Ferry requests.
  void then(std::function<void(const Result<Transfer>&)> callback);

 private:
  friend struct detail::FutureAccess;
  std::shared_ptr<detail::RequestState> state_;
};

class File {
 public:
  /// Opens `path` with `mode`: "r" (read), "w" (create or truncate, write), "r+" (read and write an
  /// existing file), "a" (create if needed; write() appends). Uses default_config() when no config is
  /// given. Errors: not_found, permission_denied, is_a_directory, invalid_argument (bad mode, bad
  /// FERRY_* variable), all naming the path.
  [[nodiscard]] static Result<File> open(const std::string& path, std::string_view mode);
  [[nodiscard]] static Result<File> open(const std::string& path, std::string_view mode,
                                         const Config& config);

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  /// Current size in bytes (fstat). Errors: io_error naming the path.
  [[nodiscard]] Result<std::uint64_t> size() const;

  /// Reads `size` bytes at `offset` into `buffer` (host or device memory), in parallel. The read covers
  /// the file as it is when the request starts: the Transfer's bytes are fewer than `size` only when the
  /// file ends first, and no byte of `buffer` past them is written, on any route. A file that shrinks
  /// while it is being read fails the request (io_error naming the offset where it ended); a file that
  /// grows is read up to the size it had. Files without a size (/proc, character devices) are read front
  /// to back in one piece, to their end. Errors: invalid_argument when offset + size passes the largest
  /// file offset (2^63 - 1); failed_precondition on a closed File; I/O errors naming the file and offset.
  /// After an error the buffer's contents are unspecified. The buffer must stay valid until the future
  /// is done.
  [[nodiscard]] Future pread(void* buffer, std::uint64_t size, std::uint64_t offset);
  /// Writes `size` bytes from `buffer` at `offset`. The data is in the page cache, not necessarily on
  /// disk, when the future completes: call sync() for durability. Errors: no_space, io_error, ...
  [[nodiscard]] Future pwrite(const void* buffer, std::uint64_t size, std::uint64_t offset);

  /// Stream-ordered read for framework code (CUDA streams): reads `size` bytes at `offset` into `buffer`
  /// as pread() does, on any route, but in `stream`'s order. `stream` is a CUstream (cudaStream_t) of any
  /// context, or nullptr for the legacy default stream. The request begins only after the work queued on
  /// `stream` before this call has finished, and work queued on `stream` afterwards waits until the
  /// request has ended (the bytes are in `buffer`); the calling thread does not wait for either. Host
  /// buffers work too: later work on the stream (a cuMemcpyHtoDAsync from them) sees the data.
  /// Ferry queues on `stream` a host function (cuLaunchHostFunc) that begins the request, then a
  /// cuStreamWaitValue32 on a word of pinned host memory that the request's end writes (where the driver
  /// refuses that, a host function that blocks until the request ended). The returned future reports the
  /// outcome and is done before the stream goes on. A request that fails, is cancelled, or finds the File
  /// closed by the time the stream reaches it still releases the stream: check the future, since work
  /// queued after it runs on whatever the buffer then holds. Errors in the future: the read's own errors;
  /// unavailable without a CUDA driver (or one lacking cuLaunchHostFunc); internal for a stream handle
  /// the driver rejects (in those cases nothing was queued). Future::cancel() before the stream reaches
  /// the request ends it at once (cancelled, nothing read); the stream is released when it gets there.
  /// close() does not wait for a stream-ordered
  /// request its stream has not reached yet: it then fails with failed_precondition. Never queue one on
  /// a stream that is being captured into a CUDA graph (host functions are captured, Ferry's wait word
  /// is not reusable there).
  [[nodiscard]] Future read_async(void* buffer, std::uint64_t size, std::uint64_t offset, void* stream);
  /// Stream-ordered write: begins once the work queued on `stream` before it (the kernels producing
  /// `buffer`) has finished; later work on `stream` waits until the data has been written (to the page
  /// cache, as pwrite(); call sync() for durability). Otherwise as read_async().
  [[nodiscard]] Future write_async(const void* buffer, std::uint64_t size, std::uint64_t offset, void* stream);

  /// Blocking read at the file position, which advances by the bytes read.
  [[nodiscard]] Result<Transfer> read(void* buffer, std::uint64_t size);
  /// Blocking write at the file position (at the end of the file in mode "a"), which advances.
  [[nodiscard]] Result<Transfer> write(const void* buffer, std::uint64_t size);

  /// Decides now the route a request of `size` bytes with `buffer`, moving bytes in `direction`, would
  /// take, and does its one-time work (loading CUDA and cuFile, registering the file with cuFile, pinning
  /// bounce buffers), so that the first request does not pay for it. Optional: requests do this
  /// themselves. Errors: the refusals a request would get (compat mode off without cuFile, require=gds
  /// without the direct route).
  [[nodiscard]] Result<RoutePlan> prepare(const void* buffer, std::uint64_t size,
                                          Direction direction = Direction::read);
  /// fdatasync: what was written is on the device when this returns OK.
  [[nodiscard]] Status sync();
  /// Waits until no request of this File is running (on any thread), then closes the descriptors (and
  /// its cuFile registration). Requests and calls made after close() began fail with failed_precondition;
  /// closing twice is OK. Called from a completion callback, it runs queued work while it waits.
  Status close();

  const std::string& path() const;
  /// The file's buffered (not O_DIRECT) descriptor, for calls Ferry does not make (fstat, flock,
  /// posix_fadvise); -1 once closed. It stays Ferry's: do not close it, and do not use it after close().
  int fileno() const;
  const Config& config() const;
  /// All operations of this File so far.
  Report report() const;
  /// Whether the file system accepted O_DIRECT for this file, and if not, why.
  bool direct_io_available() const;
  const std::string& direct_io_note() const;

 private:
  explicit File(std::shared_ptr<detail::FileState> state);
  std::shared_ptr<detail::FileState> state_;
  friend class detail::FileState;
};

}  // namespace ferry
