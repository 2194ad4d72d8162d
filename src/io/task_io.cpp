// read_task / write_task: the per-task choice between the page cache and O_DIRECT.
#include "io/task_io.hpp"

#include <fmt/format.h>

#include "io/transfer_loops.hpp"

namespace ferry::detail {
namespace {

bool direct_fits(const TaskIo& io, std::uint64_t offset, std::uint64_t length, const void* mem) {
  if (!io.fds->direct_available()) return false;
  std::uint64_t oa = io.fds->direct_offset_alignment();
  std::uint64_t ma = io.fds->direct_memory_alignment();
  return is_aligned(offset, oa) && is_aligned(length, oa) &&
         is_aligned(reinterpret_cast<std::uintptr_t>(mem), ma);
}

Status transfer_error(const TaskIo& io, const char* verb, const char* prep, std::uint64_t length,
                      std::uint64_t offset, const char* route_label, bool direct, int err) {
  return Status::from_errno(err,
                            fmt::format("Could not {} {} bytes at offset {} {} \"{}\" via {} ({})", verb, length,
                                        offset, prep, *io.path, route_label, direct ? "O_DIRECT" : "buffered"),
                            *io.path);
}

// In `auto`, whether the task's bytes are all in the page cache (then a buffered read is a memory copy
// and O_DIRECT would go to the device instead). Asked without causing I/O; where the kernel cannot say,
// the file falls back to buffered reads for good, and the report notes it.
bool wholly_cached(const TaskIo& io, const Task& t, Report& report) {
  if (io.cache_probe_unsupported->load(std::memory_order_relaxed)) return true;
  std::uint64_t cached = 0, total = 0;
  int rc = io.sys->cached_pages(io.fds->buffered_fd(), t.file_offset, t.length, &cached, &total);
  for (int retries = 0; rc == -EINTR && retries < kMaxRetries; ++retries) {
    ++report.io.eintr_retries;
    rc = io.sys->cached_pages(io.fds->buffered_fd(), t.file_offset, t.length, &cached, &total);
  }
  if (rc < 0) {
    io.cache_probe_unsupported->store(true, std::memory_order_relaxed);
    report.add_note(fmt::format("the kernel cannot tell what of \"{}\" is in the page cache (cachestat and "
                                "mincore: {}): buffered reads are used",
                                *io.path, errno_name(-rc)));
    return true;
  }
  if (cached < total) return false;
  ++report.io.cached_ops;
  return true;
}

}  // namespace

Result<std::uint64_t> read_task(const TaskIo& io, const Task& t, void* dst, const char* route_label,
                                Report& report) {
  char* out = static_cast<char*>(dst);
  std::uint64_t done = 0;
  std::uint64_t offset = t.file_offset;
  std::uint64_t length = t.length;
  // O_DIRECT only below the size seen at the start: past EOF a direct read could fill whole blocks.
  bool below_eof = t.file_offset + t.length <= io.file_size;
  bool direct = io.policy != DirectIo::off && below_eof && direct_fits(io, offset, length, out);
  if (direct && io.policy == DirectIo::automatic) direct = !wholly_cached(io, t, report);
  if (direct) {
    LoopOutcome r = read_fully(*io.sys, io.fds->direct_fd(), out + done, length, offset, report.io);
    if (r.error == EINVAL && r.bytes == 0) {
      // Some file systems accept the O_DIRECT open but refuse the read itself: fall back, and say so.
      report.add_note(fmt::format("O_DIRECT read refused (EINVAL) on \"{}\": buffered reads used", *io.path));
      direct = false;
    } else if (r.error == EINVAL) {
      // A short O_DIRECT read left a remainder O_DIRECT cannot take (unaligned): finish it buffered.
      ++report.io.direct_ops;
      done += r.bytes;
      offset += r.bytes;
      length -= r.bytes;
      direct = false;
    } else {
      ++report.io.direct_ops;
      if (r.error != 0) {
        return transfer_error(io, "read", "from", length - r.bytes, offset + r.bytes, route_label, true, r.error);
      }
      return done + r.bytes;
    }
  }
  LoopOutcome r = read_fully(*io.sys, io.fds->buffered_fd(), out + done, length, offset, report.io);
  ++report.io.buffered_ops;
  if (r.error != 0) {
    return transfer_error(io, "read", "from", length - r.bytes, offset + r.bytes, route_label, false, r.error);
  }
  if (!io.size_known && r.bytes > 0) {
    report.add_note(fmt::format("\"{}\" has no size to plan by (a /proc or /sys file, or a character device): it "
                                "was read front to back in one piece, to its end",
                                *io.path));
  }
  return done + r.bytes;
}

Status write_task(const TaskIo& io, const Task& t, const void* src, const char* route_label, Report& report) {
  // Writes go through the page cache unless O_DIRECT is asked for, or in `auto` the write is large.
  const bool want_direct = io.policy == DirectIo::on || (io.policy == DirectIo::automatic && io.large_write);
  bool direct = want_direct && direct_fits(io, t.file_offset, t.length, src);
  int fd = direct ? io.fds->direct_fd() : io.fds->buffered_fd();
  LoopOutcome w = write_fully(*io.sys, fd, src, t.length, t.file_offset, report.io);
  if (direct && w.error == EINVAL && w.bytes == 0) {
    report.add_note(fmt::format("O_DIRECT write refused (EINVAL) on \"{}\": buffered writes used", *io.path));
    direct = false;
    w = write_fully(*io.sys, io.fds->buffered_fd(), src, t.length, t.file_offset, report.io);
  } else if (direct && w.error == EINVAL) {
    // A short O_DIRECT write left a remainder O_DIRECT cannot take (unaligned): finish it buffered.
    ++report.io.direct_ops;
    direct = false;
    std::uint64_t written = w.bytes;
    w = write_fully(*io.sys, io.fds->buffered_fd(), static_cast<const char*>(src) + written, t.length - written,
                    t.file_offset + written, report.io);
    w.bytes += written;
  }
  ++(direct ? report.io.direct_ops : report.io.buffered_ops);
  if (w.error != 0) {
    return transfer_error(io, "write", "to", t.length - w.bytes, t.file_offset + w.bytes, route_label, direct,
                          w.error);
  }
  return Status();
}

}  // namespace ferry::detail
