// The baselines and ceilings of `ferry-bench`, built from plain system calls and the CUDA driver, with
// nothing of Ferry's engine: pinned host<->device copies, raw parallel pread/pwrite into one large host
// buffer, and the naive way (one read of the whole file, then one copy).
// Thread safety: each function may be called from one thread at a time per object; parallel_file_io
// starts and joins its own threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/unique_fd.hpp"
#include "ferry/status.hpp"
#include "ferry_bench/harness.hpp"  // round_up_4k

namespace ferry::cli::bench {

/// Opens `path` for reading or writing (never creating or truncating), with O_DIRECT when `direct`.
/// Errors: open_fd's (base/unique_fd.hpp).
[[nodiscard]] Result<detail::UniqueFd> open_file(const std::string& path, bool write, bool direct);

/// Chunk start offsets covering [0, size) in steps of `task_size`: in order, or shuffled with `seed`.
std::vector<std::uint64_t> chunk_offsets(std::uint64_t size, std::uint64_t task_size, bool shuffled,
                                         std::uint64_t seed);

/// Raw parallel file I/O: `threads` threads take the chunks of `offsets` in turn and pread (or pwrite)
/// each whole, looping over short transfers and EINTR, between the file and `buffer` at the same offset.
/// With an O_DIRECT descriptor, lengths are rounded up to 4 KiB (the buffer must have room: see
/// round_up_4k) and a read that ends early at the end of the file is fine.
/// Returns the bytes moved (at most `size`). Errors: the first failing call, naming the offset.
struct FileIo {
  int fd = -1;
  bool write = false;
  bool direct = false;
  std::uint8_t* buffer = nullptr;
  std::uint64_t size = 0;
  std::uint64_t task_size = 0;
  unsigned threads = 1;
  const std::vector<std::uint64_t>* offsets = nullptr;
};
[[nodiscard]] Result<std::uint64_t> parallel_file_io(const FileIo& job);

/// One way of copying for the copy ceiling: chunk size and stream count.
struct CopyShape {
  std::uint64_t chunk = 0;
  unsigned streams = 0;
};
/// The shapes the copy ceiling tries; its value is the best of them, so that the ceiling that Ferry's routes
/// are compared with is not underestimated by one unlucky shape.
inline constexpr CopyShape kCopyShapes[] = {{4ull << 20, 1},  {4ull << 20, 4},  {16ull << 20, 1}, {16ull << 20, 2},
                                            {16ull << 20, 4}, {64ull << 20, 1}, {64ull << 20, 2}, {64ull << 20, 4},
                                            {256ull << 20, 1}, {256ull << 20, 2}};

/// The copy ceiling: host<->device copies of pinned memory in chunks, round-robin on a few streams, timed by
/// the caller around run() (which returns after every stream is synchronised).
class CopyEngine {
 public:
  /// Errors: no CUDA, or the driver's failure to create streams.
  [[nodiscard]] static Result<CopyEngine> create(int device, unsigned streams);
  CopyEngine(CopyEngine&& o) noexcept;
  CopyEngine& operator=(CopyEngine&&) = delete;
  ~CopyEngine();
  /// Copies `size` bytes between `host` (pinned) and device address `device_ptr`, in either direction.
  [[nodiscard]] Status run(std::uint8_t* host, void* device_ptr, std::uint64_t size, bool to_device,
                           std::uint64_t chunk);

 private:
  explicit CopyEngine(int device) : device_(device) {}
  int device_;
  std::vector<void*> streams_;  // CUstream
};

/// The naive read: one read() loop over the whole file into `pageable`, then (with `device_ptr`) one
/// synchronous cuMemcpyHtoD of all of it. Returns bytes read.
[[nodiscard]] Result<std::uint64_t> naive_read(int fd, std::uint8_t* pageable, std::uint64_t size, int device,
                                               void* device_ptr);
/// The naive write: (with `device_ptr`) one synchronous cuMemcpyDtoH of everything into `pageable`, then
/// one write() loop at offset 0.
[[nodiscard]] Status naive_write(int fd, std::uint8_t* pageable, std::uint64_t size, int device,
                                 const void* device_ptr);

/// Fills `size` bytes at `dst` with fill_generated's data for file offset 0, with `threads` threads.
void fill_generated_parallel(std::uint8_t* dst, std::uint64_t size, unsigned threads);

}  // namespace ferry::cli::bench
