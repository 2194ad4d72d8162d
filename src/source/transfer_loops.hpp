// Loops around pread/pwrite: continue short transfers, restart EINTR/EAGAIN (a bounded number of
// times), stop at EOF. Errors come back as errno values with the offset they happened at; callers turn
// them into messages that name the file.
#pragma once

#include <cstdint>

#include "ferry/route.hpp"
#include "source/syscalls.hpp"

namespace ferry::detail {

struct LoopOutcome {
  std::uint64_t bytes = 0;  // transferred before EOF or the error
  int error = 0;            // errno, 0 on success
  bool eof = false;         // a read returned 0 before `length` bytes
};

/// Reads until `length` bytes, EOF, or an error. EIO is never retried.
LoopOutcome read_fully(Syscalls& sys, int fd, void* buf, std::uint64_t length, std::uint64_t offset,
                       IoCounters& io);
/// Reads what the page cache holds of the range without waiting for the device (pread_nowait), until
/// `length` bytes, EOF, or the first page that is not cached: then `error` is EAGAIN and `bytes` the cached
/// prefix read. EOPNOTSUPP: the file or kernel cannot read so. Short transfers continue, EINTR restarts.
LoopOutcome read_cached_prefix(Syscalls& sys, int fd, void* buf, std::uint64_t length, std::uint64_t offset,
                               IoCounters& io);
/// Writes all `length` bytes or fails. A write that makes no progress fails with ENOSPC's neighbour EIO.
LoopOutcome write_fully(Syscalls& sys, int fd, const void* buf, std::uint64_t length, std::uint64_t offset,
                        IoCounters& io);
inline constexpr int kMaxRetries = 1000;

}  // namespace ferry::detail
