// PosixSource: a local file's size, and the per-task choice between the page cache and O_DIRECT.
#include "source/posix_source.hpp"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "base/host_memory.hpp"
#include "source/host_bounce.hpp"
#include "source/transfer_loops.hpp"
#include "source/uring_batch.hpp"

namespace ferry::detail {

Result<Extent> PosixSource::extent() const {
  switch (fds_.kind()) {
    case FileKind::regular: {
      // Size 0 is what /proc and /sys files report whatever they hold: read those to their end instead.
      FERRY_ASSIGN_OR_RETURN(std::uint64_t bytes, current_size());
      return Extent{bytes > 0, bytes};
    }
    case FileKind::block_device: {
      off_t end = sys_.seek_end(fds_.buffered_fd());
      if (end < 0) {
        return Status::from_errno(static_cast<int>(-end), fmt::format("Could not size \"{}\"", path_), path_);
      }
      return Extent{true, static_cast<std::uint64_t>(end)};
    }
    case FileKind::character_device:
      return Extent{false, 0};
  }
  return Extent{false, 0};
}

Result<std::uint64_t> PosixSource::current_size() const {
  struct stat st;
  int rc = sys_.fstat(fds_.buffered_fd(), &st);
  if (rc < 0) return Status::from_errno(-rc, fmt::format("Could not stat \"{}\"", path_), path_);
  return static_cast<std::uint64_t>(st.st_size);
}

Status PosixSource::sync() {
  int rc = sys_.fdatasync(fds_.buffered_fd());
  if (rc < 0) return Status::from_errno(-rc, fmt::format("Could not sync \"{}\" to its device", path_), path_);
  return Status();
}

bool PosixSource::direct_fits_file(std::uint64_t offset, std::uint64_t length) const {
  if (!fds_.direct_available()) return false;
  const std::uint64_t oa = fds_.direct_offset_alignment();
  return is_aligned(offset, oa) && is_aligned(length, oa);
}

bool PosixSource::direct_fits_memory(const void* mem) const {
  return is_aligned(reinterpret_cast<std::uintptr_t>(mem), fds_.direct_memory_alignment());
}

Status PosixSource::transfer_error(const char* verb, const char* prep, std::uint64_t length, std::uint64_t offset,
                                   const char* route_label, bool direct, int err) const {
  return Status::from_errno(err,
                            fmt::format("Could not {} {} bytes at offset {} {} \"{}\" via {} ({})", verb, length,
                                        offset, prep, path_, route_label, direct ? "O_DIRECT" : "buffered"),
                            path_);
}

// In `auto`, whether the task's bytes are all in the page cache (then a buffered read is a memory copy
// and O_DIRECT would go to the device instead). Asked without causing I/O; where the kernel cannot say,
// the file falls back to buffered reads for good, and the report notes it.
bool PosixSource::wholly_cached(const Task& t, Report& report) {
  if (cache_probe_unsupported_.load(std::memory_order_relaxed)) return true;
  std::uint64_t cached = 0, total = 0;
  int rc = sys_.cached_pages(fds_.buffered_fd(), t.file_offset, t.length, &cached, &total);
  for (int retries = 0; rc == -EINTR && retries < kMaxRetries; ++retries) {
    ++report.io.eintr_retries;
    rc = sys_.cached_pages(fds_.buffered_fd(), t.file_offset, t.length, &cached, &total);
  }
  if (rc < 0) {
    cache_probe_unsupported_.store(true, std::memory_order_relaxed);
    report.add_note(fmt::format("the kernel cannot tell what of \"{}\" is in the page cache (cachestat and "
                                "mincore: {}): buffered reads are used",
                                path_, errno_name(-rc)));
    return true;
  }
  if (cached < total) return false;
  ++report.io.cached_ops;
  return true;
}

bool PosixSource::read_direct(const SourceRequest& request, const Task& t, Report& report) {
  // O_DIRECT only below the size seen at the start: past EOF a direct read could fill whole blocks.
  bool below_eof = t.file_offset + t.length <= request.extent.bytes;
  bool direct = policy_ != DirectIo::off && below_eof && direct_fits_file(t.file_offset, t.length);
  if (direct && policy_ == DirectIo::automatic) {
    const bool cached = wholly_cached(t, report);
    note_cached(t, cached);
    direct = !cached;
  }
  return direct;
}

namespace {

// Where the next byte of a task read through a bounce buffer goes among its parts.
class PartCursor {
 public:
  explicit PartCursor(std::span<const MemoryPart> parts) : parts_(parts) {}
  // Copies `n` bytes from `from` to the parts, from the cursor on.
  void copy(const char* from, std::uint64_t n) {
    while (n > 0 && index_ < parts_.size()) {
      const MemoryPart& part = parts_[index_];
      const std::uint64_t take = std::min(n, part.length - within_);
      populate(static_cast<char*>(part.dst) + within_, take);
      std::memcpy(static_cast<char*>(part.dst) + within_, from, take);
      from += take;
      n -= take;
      within_ += take;
      if (within_ == part.length) {
        ++index_;
        within_ = 0;
      }
    }
  }
  // The parts' bytes not placed yet.
  std::vector<MemoryPart> rest() const {
    std::vector<MemoryPart> out;
    for (std::size_t i = index_; i < parts_.size(); ++i) {
      const std::uint64_t skip = i == index_ ? within_ : 0;
      out.push_back(MemoryPart{static_cast<char*>(parts_[i].dst) + skip, parts_[i].length - skip});
    }
    return out;
  }

 private:
  // Faults in the whole pages of [p, p + n) in one call where the kernel can (MADV_POPULATE_WRITE, Linux
  // 5.14; it leaves their contents as they are): a fresh np.empty buffer otherwise takes a page fault every
  // 4 KiB of the copy, which made it 0.81x of an O_DIRECT read into an aligned buffer on the 2-core machine.
  static void populate(char* p, std::uint64_t n) {
#ifdef MADV_POPULATE_WRITE
    const std::uint64_t page = system_page_bytes();
    const auto begin = align_up(reinterpret_cast<std::uintptr_t>(p), page);
    const auto end = align_down(reinterpret_cast<std::uintptr_t>(p) + n, page);
    if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)n;
#endif
  }

  std::span<const MemoryPart> parts_;
  std::size_t index_ = 0;
  std::uint64_t within_ = 0;
};

}  // namespace

std::optional<Result<std::uint64_t>> PosixSource::read_bounced(const SourceRequest& request, const Task& t,
                                                               std::span<const MemoryPart> parts,
                                                               const char* route_label, Report& report) {
  HostBounce bounce;
  if (bounce.data() == nullptr) return std::nullopt;
  PartCursor cursor(parts);
  std::uint64_t done = 0;
  while (done < t.length) {
    const std::uint64_t n = std::min(kHostBounceBytes, t.length - done);
    const std::uint64_t at = t.file_offset + done;
    LoopOutcome r = read_fully(sys_, fds_.direct_fd(), bounce.data(), n, at, report.io);
    if (r.error == EINVAL && done == 0 && r.bytes == 0) {
      // Some file systems accept the O_DIRECT open but refuse the read itself: the caller reads buffered.
      report.add_note(fmt::format("O_DIRECT read refused (EINVAL) on \"{}\": buffered reads used", path_));
      return std::nullopt;
    }
    if (r.error != 0 && r.error != EINVAL) {
      ++report.io.direct_ops;
      return transfer_error("read", "from", n - r.bytes, at + r.bytes, route_label, true, r.error);
    }
    cursor.copy(bounce.data(), r.bytes);
    done += r.bytes;
    if (r.error == EINVAL) {
      // A short O_DIRECT read left a remainder O_DIRECT cannot take (unaligned): finish it buffered.
      ++report.io.direct_ops;
      Task rest{t.file_offset + done, t.length - done, t.buffer_offset + done, false};
      std::vector<MemoryPart> places = cursor.rest();
      FERRY_ASSIGN_OR_RETURN(std::uint64_t more, Source::read_parts(request, rest, places, route_label, report));
      return done + more;
    }
    if (r.bytes < n) break;  // the file ended early (it shrank): the engine says so
  }
  ++report.io.direct_ops;
  report.add_note(fmt::format("cold reads of \"{}\" into memory that O_DIRECT cannot reach (not {}-byte aligned, "
                              "or split among several buffers) went through O_DIRECT into an aligned bounce buffer "
                              "and were copied into place",
                              path_, fds_.direct_memory_alignment()));
  return done;
}

Result<std::uint64_t> PosixSource::read_parts(const SourceRequest& request, const Task& t,
                                              std::span<const MemoryPart> parts, const char* route_label,
                                              Report& report) {
  if (parts.size() == 1) return read(request, t, parts[0].dst, route_label, report);
  if (read_direct(request, t, report)) {
    if (auto bounced = read_bounced(request, t, parts, route_label, report)) return std::move(*bounced);
  }
  return Source::read_parts(request, t, parts, route_label, report);
}

std::size_t PosixSource::queue_depth() const {
  return engine_ == IoEngine::io_uring && !uring_refused_.load(std::memory_order_relaxed) ? kUringDepth : 1;
}

void PosixSource::read_batch(const SourceRequest& request, std::span<const TaskRead> reads, const char* route_label,
                             Report& report, std::span<Result<std::uint64_t>> results) {
  // Memory O_DIRECT cannot reach goes through read(), whose cold reads take a bounce buffer.
  const bool unreachable = std::any_of(reads.begin(), reads.end(), [&](const TaskRead& r) {
    return direct_fits_file(r.task.file_offset, r.task.length) && !direct_fits_memory(r.dst);
  });
  if (engine_ != IoEngine::io_uring || uring_refused_.load(std::memory_order_relaxed) || !request.extent.known ||
      unreachable) {
    return Source::read_batch(request, reads, route_label, report, results);
  }
  std::vector<UringRead> batch(reads.size());
  std::vector<bool> direct(reads.size());
  for (std::size_t i = 0; i < reads.size(); ++i) {
    const Task& t = reads[i].task;
    // As read(): while the file's reads of this class find their pages cached, the read itself asks (without
    // waiting); otherwise the page cache is asked first (cachestat), for O_DIRECT where it would miss.
    const bool cached_first = reads_cached_first(request, t);
    direct[i] = !cached_first && read_direct(request, t, report) && direct_fits_memory(reads[i].dst);
    batch[i] = UringRead{direct[i] ? fds_.direct_fd() : fds_.buffered_fd(), reads[i].dst,
                         static_cast<std::uint32_t>(t.length), t.file_offset, cached_first, 0};
  }
  Status submitted = uring_read_all(batch);
  if (!submitted.ok()) {
    // Refused by the kernel (old, or a seccomp filter): say so once and read with pread from now on.
    if (!uring_refused_.exchange(true)) {
      report.add_note(fmt::format("io_engine=io_uring for \"{}\": {}; pread is used instead", path_,
                                  submitted.message()));
    }
    return Source::read_batch(request, reads, route_label, report, results);
  }
  for (std::size_t i = 0; i < reads.size(); ++i) {
    const Task& t = reads[i].task;
    const std::int64_t got = batch[i].result;
    const bool nowait = batch[i].nowait;
    if (got == static_cast<std::int64_t>(t.length)) {
      ++(direct[i] ? report.io.direct_ops : report.io.buffered_ops);
      if (nowait) {
        ++report.io.cached_ops;
        note_cached(t, true);
      }
      results[i] = t.length;
    } else if (got < 0) {
      if (nowait && got == -EAGAIN) note_cached(t, false);
      if (nowait && (got == -EOPNOTSUPP || got == -ENOSYS)) nowait_unsupported_.store(true, std::memory_order_relaxed);
      // EINTR, EAGAIN, an O_DIRECT refusal: read() knows each of them (retries, falls back, or names the
      // error with the file and offset).
      results[i] = read(request, t, reads[i].dst, route_label, report);
    } else {
      // Short: EOF, a partial transfer, or (without waiting) the cached part. read() finishes the rest (or
      // finds the end) the usual way.
      const auto done = static_cast<std::uint64_t>(got);
      if (nowait && t.file_offset + done < request.extent.bytes) note_cached(t, false);
      ++report.io.short_transfers;
      ++(direct[i] ? report.io.direct_ops : report.io.buffered_ops);
      Task rest{t.file_offset + done, t.length - done, t.buffer_offset + done, false};
      Result<std::uint64_t> more = read(request, rest, static_cast<char*>(reads[i].dst) + done, route_label, report);
      results[i] = more.ok() ? Result<std::uint64_t>(done + *more) : more;
    }
  }
}

Result<std::uint64_t> PosixSource::read(const SourceRequest& request, const Task& t, void* dst,
                                        const char* route_label, Report& report) {
  char* out = static_cast<char*>(dst);
  std::uint64_t done = 0;
  std::uint64_t offset = t.file_offset;
  std::uint64_t length = t.length;
  const bool cached_first = reads_cached_first(request, t);  // decided once: other readers move the score
  bool direct = !cached_first && read_direct(request, t, report);
  if (direct && !direct_fits_memory(out)) {
    const MemoryPart whole{out, length};
    if (auto bounced = read_bounced(request, t, {&whole, 1}, route_label, report)) return std::move(*bounced);
    direct = false;
  }
  if (direct) {
    LoopOutcome r = read_fully(sys_, fds_.direct_fd(), out + done, length, offset, report.io);
    if (r.error == EINVAL && r.bytes == 0) {
      // Some file systems accept the O_DIRECT open but refuse the read itself: fall back, and say so.
      report.add_note(fmt::format("O_DIRECT read refused (EINVAL) on \"{}\": buffered reads used", path_));
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
        return transfer_error("read", "from", length - r.bytes, offset + r.bytes, route_label, true, r.error);
      }
      return done + r.bytes;
    }
  }
  if (cached_first) {
    LoopOutcome c = read_cached_prefix(sys_, fds_.buffered_fd(), out + done, length, offset, report.io);
    if (c.error == 0) {  // all of it (or all up to EOF) was cached
      ++report.io.buffered_ops;
      ++report.io.cached_ops;
      note_cached(t, true);
      return done + c.bytes;
    }
    if (c.error == EAGAIN) {
      note_cached(t, false);
    } else if (c.error == EOPNOTSUPP || c.error == ENOSYS) {
      nowait_unsupported_.store(true, std::memory_order_relaxed);
    } else {
      return transfer_error("read", "from", length - c.bytes, offset + c.bytes, route_label, false, c.error);
    }
    done += c.bytes;  // the cached prefix; the rest is being read in
    offset += c.bytes;
    length -= c.bytes;
  }
  LoopOutcome r = read_fully(sys_, fds_.buffered_fd(), out + done, length, offset, report.io);
  ++report.io.buffered_ops;
  if (r.error != 0) {
    return transfer_error("read", "from", length - r.bytes, offset + r.bytes, route_label, false, r.error);
  }
  if (!request.extent.known && r.bytes > 0) {
    report.add_note(fmt::format("\"{}\" has no size to plan by (a /proc or /sys file, or a character device): it "
                                "was read front to back in one piece, to its end",
                                path_));
  }
  return done + r.bytes;
}

Status PosixSource::write(const SourceRequest& request, const Task& t, const void* src, const char* route_label,
                          Report& report) {
  // Writes go through the page cache unless O_DIRECT is asked for, or in `auto` the write is large.
  const bool large = request.bytes >= kDirectWriteThreshold;
  const bool want_direct = policy_ == DirectIo::on || (policy_ == DirectIo::automatic && large);
  bool direct = want_direct && direct_fits_file(t.file_offset, t.length) && direct_fits_memory(src);
  int fd = direct ? fds_.direct_fd() : fds_.buffered_fd();
  LoopOutcome w = write_fully(sys_, fd, src, t.length, t.file_offset, report.io);
  if (direct && w.error == EINVAL && w.bytes == 0) {
    report.add_note(fmt::format("O_DIRECT write refused (EINVAL) on \"{}\": buffered writes used", path_));
    direct = false;
    w = write_fully(sys_, fds_.buffered_fd(), src, t.length, t.file_offset, report.io);
  } else if (direct && w.error == EINVAL) {
    // A short O_DIRECT write left a remainder O_DIRECT cannot take (unaligned): finish it buffered.
    ++report.io.direct_ops;
    direct = false;
    std::uint64_t written = w.bytes;
    w = write_fully(sys_, fds_.buffered_fd(), static_cast<const char*>(src) + written, t.length - written,
                    t.file_offset + written, report.io);
    w.bytes += written;
  }
  ++(direct ? report.io.direct_ops : report.io.buffered_ops);
  if (w.error != 0) {
    return transfer_error("write", "to", t.length - w.bytes, t.file_offset + w.bytes, route_label, direct,
                          w.error);
  }
  return Status();
}

}  // namespace ferry::detail
