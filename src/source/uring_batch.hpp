// Several reads in flight at once through io_uring (liburing): the queue behind PosixSource's `io_uring`
// engine. One ring per thread, made on the thread's first batch and kept; where the kernel (or a seccomp
// filter, as in many containers) refuses io_uring, uring_read_all says so and the caller reads with pread.
#pragma once

#include <cstdint>
#include <span>

#include "ferry/status.hpp"

namespace ferry::detail {

/// Reads a ring holds at once: a batch is submitted in one call and reaped together.
inline constexpr unsigned kUringDepth = 16;

struct UringRead {
  int fd = -1;
  void* dst = nullptr;
  std::uint32_t length = 0;
  std::uint64_t offset = 0;
  bool nowait = false;      // RWF_NOWAIT: only what the page cache holds now, else -EAGAIN (or a cached prefix)
  std::int64_t result = 0;  // set by uring_read_all: bytes read (fewer at EOF or a short read), or -errno
};

/// Reads all of `reads`, kUringDepth of them in flight at a time, and waits for every one. Errors:
/// unavailable when this thread's ring cannot be set up (with the kernel's reason), the kernel refused the
/// first submission, or the build has no liburing; then no read was submitted. A read the kernel did not
/// take after the first ones were (a later submission refused) has its result set to that -errno, for the
/// caller to read another way.
Status uring_read_all(std::span<UringRead> reads);

}  // namespace ferry::detail
