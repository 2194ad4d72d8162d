// ferry/file.hpp: reading and writing a file from and into host or GPU memory.
//
// A request is split into tasks of Config::task_size that run in parallel on Ferry's thread pool; each
// task is one operation in the route report. Buffers may be host memory (pageable or pinned) or device
// memory (a CUdeviceptr cast to void*); Ferry classifies them itself.
// Thread safety: a File may be read, written and closed from many threads at once (close() says what it waits
// for and what fails after it); destroying a File closes it as close() does.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/config.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry {

namespace detail {
class RequestState;
class FileState;
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
  /// Blocks until done. A small request (one task) that no worker has begun runs on the calling thread, which
  /// saves two thread hand-offs. Called from a Ferry worker (inside a completion callback), it runs queued
  /// work while it waits instead of blocking a worker, so nested reads cannot deadlock the pool.
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
  std::shared_ptr<detail::RequestState> state_;
};

/// One piece of a batch (File::pread_batch): `size` bytes at file `offset` into `buffer`.
struct Piece {
  void* buffer = nullptr;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
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

  /// Reads every piece of `pieces` (piece i: `size` bytes at file `offset` into `buffer`), in parallel, as one request:
  /// one Future, whose report counts every piece as an operation. For the many small reads of data loaders (samples at
  /// random offsets); into device memory the pieces are packed into bounce buffers (docs/routes.md). All pieces are
  /// host memory, or all are device memory of one GPU. The Transfer's bytes are the sum of what the pieces read: a
  /// piece reads fewer bytes only where the file ends (as it is when the batch starts), and no byte past what a piece
  /// read is written. Pieces may overlap in the file, be empty, or repeat. `pieces` is copied: it need not outlive the
  /// call; the buffers must outlive the future. Errors before any I/O, naming the piece's index: invalid_argument (a
  /// null buffer, a range past the largest offset, pieces in different kinds of memory or on different GPUs, a device
  /// piece outside its allocation); failed_precondition on a closed File or with require=gds into device memory
  /// (batches take the staged route, reason batch_pieces). Larger batches, and more of them in flight, move faster
  /// (bench/NOTES.md).
  [[nodiscard]] Future pread_batch(std::span<const Piece> pieces);

  /// Stream-ordered read for framework code (CUDA streams): reads `size` bytes at `offset` into `buffer`
  /// as pread() does, but in `stream`'s order. `stream` is a CUstream (cudaStream_t) of any context, or
  /// nullptr for the legacy default stream. The read begins only after the work queued on `stream` before
  /// this call has finished, and work queued on `stream` afterwards sees the bytes in `buffer`. It covers
  /// the file as it is when read_async is called (the copies are planned then). It returns at once, except
  /// where it cannot order the request on the stream (cuFile's routes, files without a size, a stream of
  /// another context than the buffer's, drivers without stream memory operations): then it synchronises
  /// `stream`, reads as pread() and waits, and the report's note says why. How each is ordered
  /// (Report::stream_order), and why it cannot deadlock: docs/stream-order.md.
  /// The future is done once the stream has passed the request (soon after later work may begin), and
  /// `buffer` is in use until then. A request that fails, is cancelled, or finds the File closed by the
  /// time the stream reaches it still lets the stream through: check the future, since work queued after
  /// it then runs on whatever the buffer holds. Errors known at once come back as a failed future with
  /// nothing queued: unavailable without a CUDA driver; failed_precondition for a stream being captured
  /// into a CUDA graph (Ferry reads on the CPU, outside any graph); invalid_argument for a default stream
  /// with no current context; internal for a stream handle the driver rejects; the driver's error when
  /// bounce buffers cannot be pinned. close() does not wait for a stream-ordered request its stream has
  /// not reached yet: that request then fails with failed_precondition.
  [[nodiscard]] Future read_async(void* buffer, std::uint64_t size, std::uint64_t offset, void* stream);
  /// Stream-ordered write: reads `buffer` only after the work queued on `stream` before it (the kernels
  /// producing it) has finished; work queued on `stream` afterwards waits until the data has been written
  /// (to the page cache, as pwrite(); call sync() for durability), so it may overwrite `buffer` and a
  /// later read_async of the same bytes sees them. Otherwise as read_async().
  [[nodiscard]] Future write_async(const void* buffer, std::uint64_t size, std::uint64_t offset, void* stream);

  /// Blocking read at the file position, which advances by the bytes read: read_at_position(...).get().
  [[nodiscard]] Result<Transfer> read(void* buffer, std::uint64_t size);
  /// Blocking write at the file position (mode "a": the end of the file), which advances: write_at_position(...).get().
  [[nodiscard]] Result<Transfer> write(const void* buffer, std::uint64_t size);
  /// read() as a future: reserves `size` bytes at the file position, which moves past them at once (a read on
  /// another thread reads on from there), and reads them as pread(). When the request completes, a read that
  /// ended early (where the data did) pulls the position back to where it ended, and one that failed or was
  /// cancelled back to where it began, unless another call moved it since; get() returns after that.
  [[nodiscard]] Future read_at_position(void* buffer, std::uint64_t size);
  /// write() as a future, as read_at_position(). In mode "a" it lands at the end of the file as it is now (the
  /// larger of the position and the file's size: bytes another writer added are not overwritten).
  [[nodiscard]] Future write_at_position(const void* buffer, std::uint64_t size);
  /// The file position: where the next read() starts (in mode "a", where the next write() appends at the
  /// earliest: the end of the last write, or of the file at open). pread(), pwrite() and the stream-ordered
  /// calls neither use nor move it.
  std::uint64_t tell() const;
  /// Moves the file position. Requests in flight keep the offsets they reserved; in mode "a" a write still
  /// lands at the end of the file.
  void seek(std::uint64_t position);

  /// Decides now the route a request of `size` bytes with `buffer` would take (reads and writes take the same
  /// one: `direction` changes nothing today), and does its one-time work (loading CUDA and cuFile, registering
  /// the file with cuFile, pinning bounce buffers), so that the first request does not pay for it. Optional: requests do this
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

/// One line per stream-ordered request of this process that its stream has not passed yet: what it is,
/// its route and mechanism, how many of its steps ended, and its stream's progress through it. For
/// diagnosing a stream that does not move (tests print it from their watchdogs).
std::vector<std::string> pending_stream_requests();

/// Does ahead of time what a process's first reads into GPU `device` through the staged route would do
/// inside them: retains the GPU's context, starts `config.threads()` workers and pins a staging kit for each
/// (`bounce_buffers_per_thread` buffers of `bounce_buffer_size`), so that the first request pins nothing
/// (docs/safetensors.md gives the time it takes). Call it on a thread of its own while the process does
/// other start-up work (ferry.torch.meta_parameters does, while the model is built); a read
/// that starts meanwhile takes each kit as it is made. Kits that exist already count: calling it again
/// costs nothing. Errors: unavailable without a usable CUDA driver; the driver's (a bad ordinal, pinned
/// memory exhausted).
Status warm_up(int device, const Config& config);

}  // namespace ferry
