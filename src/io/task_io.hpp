// Moving one task's bytes between the file and host memory, choosing O_DIRECT or buffered I/O per task:
// in `auto`, a task whose bytes are all in the page cache (asked with cachestat, which starts no I/O) is
// read through the cache, and any other task goes through O_DIRECT when alignment allows. Shared by the host route (the caller's buffer) and the
// staged route (a pinned bounce buffer).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ferry/config.hpp"
#include "ferry/route.hpp"
#include "io/file_descriptors.hpp"
#include "io/syscalls.hpp"
#include "io/task_split.hpp"

namespace ferry::detail {

struct TaskIo {
  Syscalls* sys = nullptr;
  const FileDescriptors* fds = nullptr;
  const std::string* path = nullptr;
  DirectIo policy = DirectIo::automatic;
  std::uint64_t file_size = 0;                 // at the start of the request: O_DIRECT stays below it
  bool size_known = true;                      // false: a /proc file or character device, read to its end
  bool large_write = false;                    // a write of at least kDirectWriteThreshold bytes
  std::atomic<bool>* cache_probe_unsupported = nullptr;  // shared per file: the page cache cannot be asked
  std::shared_ptr<const void> keep_alive;      // owns what the pointers above point into
};

/// Reads task `t` into `dst`. Returns the bytes read: fewer than t.length only at EOF. Errors name the
/// file, the offset at which the failure happened, the route label and the I/O mode.
Result<std::uint64_t> read_task(const TaskIo& io, const Task& t, void* dst, const char* route_label,
                                Report& report);
/// Writes of at least this size use O_DIRECT in `auto` (where alignment allows): measured on the GPU
/// machine, 8 GiB from GPU memory with fdatasync ran at 1.45-1.51 GB/s buffered and 1.91-1.96 GB/s with
/// O_DIRECT. Smaller writes stay buffered, where they return as soon as the page cache has the data.
inline constexpr std::uint64_t kDirectWriteThreshold = 256ull << 20;

/// Writes task `t` from `src`. Errors as read_task's (no_space for ENOSPC).
Status write_task(const TaskIo& io, const Task& t, const void* src, const char* route_label, Report& report);

}  // namespace ferry::detail
