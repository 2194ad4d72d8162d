// read_fully / write_fully / read_cached_prefix.
#include "source/transfer_loops.hpp"

#include <algorithm>
#include <cerrno>

#include "base/direction.hpp"

namespace ferry::detail {
namespace {

// One system call moves at most this much: Linux caps a transfer near 2 GiB anyway.
constexpr std::uint64_t kMaxChunk = 1ull << 30;

// `again_is_an_answer`: EAGAIN ends the loop (a read that must not wait) instead of being retried.
template <typename Call>
LoopOutcome loop(std::uint64_t length, IoCounters& io, Direction direction, Call call,
                 bool again_is_an_answer = false) {
  LoopOutcome out;
  int retries = 0;
  while (out.bytes < length) {
    std::uint64_t want = std::min(length - out.bytes, kMaxChunk);
    ssize_t n = call(out.bytes, want);
    if (n < 0) {
      int e = static_cast<int>(-n);
      if ((e == EINTR || (e == EAGAIN && !again_is_an_answer)) && retries < kMaxRetries) {
        ++retries;
        ++io.eintr_retries;
        continue;
      }
      out.error = e;
      return out;
    }
    if (n == 0) {
      if (is_read(direction)) {
        out.eof = true;
        return out;
      }
      // A write that moves nothing cannot finish; the kernel would normally have said ENOSPC.
      out.error = EIO;
      return out;
    }
    out.bytes += static_cast<std::uint64_t>(n);
    if (static_cast<std::uint64_t>(n) < want && out.bytes < length) ++io.short_transfers;
  }
  return out;
}

}  // namespace

LoopOutcome read_fully(Syscalls& sys, int fd, void* buf, std::uint64_t length, std::uint64_t offset,
                       IoCounters& io) {
  auto* p = static_cast<char*>(buf);
  return loop(length, io, Direction::read, [&](std::uint64_t done, std::uint64_t want) {
    return sys.pread(fd, p + done, want, static_cast<off_t>(offset + done));
  });
}

LoopOutcome read_cached_prefix(Syscalls& sys, int fd, void* buf, std::uint64_t length, std::uint64_t offset,
                               IoCounters& io) {
  auto* p = static_cast<char*>(buf);
  return loop(
      length, io, Direction::read,
      [&](std::uint64_t done, std::uint64_t want) {
        return sys.pread_nowait(fd, p + done, want, static_cast<off_t>(offset + done));
      },
      /*again_is_an_answer=*/true);
}

LoopOutcome write_fully(Syscalls& sys, int fd, const void* buf, std::uint64_t length, std::uint64_t offset,
                        IoCounters& io) {
  const auto* p = static_cast<const char*>(buf);
  return loop(length, io, Direction::write, [&](std::uint64_t done, std::uint64_t want) {
    return sys.pwrite(fd, p + done, want, static_cast<off_t>(offset + done));
  });
}

}  // namespace ferry::detail
