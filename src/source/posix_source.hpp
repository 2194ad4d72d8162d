// A local file (or block or character device) as a Source: two descriptors, buffered and O_DIRECT, and the
// per-task choice between them. In `auto`, a task whose bytes are all in the page cache (asked with
// cachestat, which starts no I/O) is read through the cache, and any other task goes through O_DIRECT
// where alignment allows; while the file's reads of a task's size keep finding their pages cached, a task of
// up to kMostGatheredBytes asks the cache by reading it without waiting instead; large writes go through
// O_DIRECT.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "ferry/config.hpp"
#include "source/file_descriptors.hpp"
#include "source/source.hpp"
#include "source/syscalls.hpp"

namespace ferry::detail {

/// Writes of at least this size use O_DIRECT in `auto` (where alignment allows): measured on the GPU
/// machine, 8 GiB from GPU memory with fdatasync ran at 1.45-1.51 GB/s buffered and 1.91-1.96 GB/s with
/// O_DIRECT. Smaller writes stay buffered, where they return as soon as the page cache has the data.
inline constexpr std::uint64_t kDirectWriteThreshold = 256ull << 20;

/// Reads of at most kMostGatheredBytes in `auto`, while the file's recent reads of their size class found
/// their pages cached, go through the page cache, asking it first for what it holds without waiting
/// (RWF_NOWAIT): one system call where the data is cached, against two for cachestat and then the read (the
/// probe was half the cost of a hot 4 KiB piece). On a miss the kernel has begun reading the pages in, so the
/// rest is read buffered, waiting for that read: an O_DIRECT read would read them a second time. Cold random
/// reads through the page cache ran slower than O_DIRECT on the H200 machine's disk (4-16 KiB: about
/// 0.85-0.9 of it; 64 KiB: 0.6-0.7), so once a file's reads of a class miss more than they hit, they are
/// probed as larger ones are, and cold ones use O_DIRECT, until the probes find them cached again
/// (kSmallReadMemory). The two classes: small reads (up to kSmallReadBytes) start out reading the cache first;
/// larger ones start out probed, and read the cache first once a probe of one found it cached.
inline constexpr std::uint64_t kSmallReadBytes = 16 << 10;
/// Reads of at most this size read the cache first while their class hits (above), and may be gathered
/// (share a worker: engine/queue.hpp).
inline constexpr std::uint64_t kMostGatheredBytes = 64 << 10;
/// How far a file's run of small-read hits or misses is remembered: after this many hits in a row, misses
/// in a row take as many reads to turn small reads to the probe (and the other way round).
inline constexpr int kSmallReadMemory = 16;

class PosixSource : public Source {
 public:
  PosixSource(Syscalls& sys, FileDescriptors fds, std::string path, DirectIo policy,
              IoEngine engine = IoEngine::psync)
      : sys_(sys), fds_(std::move(fds)), path_(std::move(path)), policy_(policy), engine_(engine) {}

  const std::string& name() const override { return path_; }
  Result<Extent> extent() const override;
  std::uint64_t task_alignment() const override { return fds_.direct_offset_alignment(); }
  Result<std::uint64_t> read(const SourceRequest& request, const Task& t, void* dst, const char* route_label,
                             Report& report) override;
  /// A task that O_DIRECT would read (in `auto`: not all cached) goes through an aligned bounce buffer
  /// (host_bounce.hpp) and is copied to its parts; a cached one is read part by part.
  Result<std::uint64_t> read_parts(const SourceRequest& request, const Task& t, std::span<const MemoryPart> parts,
                                   const char* route_label, Report& report) override;
  Status write(const SourceRequest& request, const Task& t, const void* src, const char* route_label,
               Report& report) override;
  Status sync() override;
  /// `io_uring`: the host route hands over batches of kUringDepth tasks, in flight together.
  std::size_t queue_depth() const override;
  void read_batch(const SourceRequest& request, std::span<const TaskRead> reads, const char* route_label,
                  Report& report, std::span<Result<std::uint64_t>> results) override;
  /// In `auto`: a read of up to kMostGatheredBytes while the file's reads of its class find their pages cached
  /// (by reading without waiting, which the kernel must allow: else the reads are probed as larger ones are).
  bool reads_from_memory(std::uint64_t length) const override {
    const std::atomic<int>* misses = misses_of(length);
    return misses != nullptr && misses->load(std::memory_order_relaxed) <= 0 &&
           !nowait_unsupported_.load(std::memory_order_relaxed);
  }
  std::optional<LocalFile> local_file() const override {
    return LocalFile{fds_.buffered_fd(), fds_.direct_fd()};  // direct_fd() is -1 where O_DIRECT was refused
  }
  const std::string& open_note() const override { return fds_.direct_note(); }
  Status close() override { return fds_.close(); }

  /// The size from fstat (what a regular file has now).
  Result<std::uint64_t> current_size() const;

 private:
  // Whether O_DIRECT can move [offset, offset + length) of the file, and to or from `mem`.
  bool direct_fits_file(std::uint64_t offset, std::uint64_t length) const;
  bool direct_fits_memory(const void* mem) const;
  // Whether a read of `t` should use O_DIRECT, wherever its bytes go (asks the page cache in `auto`): then
  // memory O_DIRECT cannot reach takes a bounce buffer.
  bool read_direct(const SourceRequest& request, const Task& t, Report& report);
  // Reads `t` with O_DIRECT into bounce buffers and copies each to `parts`. nullopt: nothing was read (no
  // bounce memory, or the file system refused the O_DIRECT read): the caller reads buffered.
  std::optional<Result<std::uint64_t>> read_bounced(const SourceRequest& request, const Task& t,
                                                    std::span<const MemoryPart> parts, const char* route_label,
                                                    Report& report);
  bool wholly_cached(const Task& t, Report& report);
  // In `auto`, the score of reads of `length`'s class (kSmallReadBytes, kMostGatheredBytes); none for larger
  // reads, which are always probed.
  const std::atomic<int>* misses_of(std::uint64_t length) const {
    if (policy_ != DirectIo::automatic || length > kMostGatheredBytes) return nullptr;
    return length <= kSmallReadBytes ? &small_read_misses_ : &probed_misses_;
  }
  std::atomic<int>* misses_of(std::uint64_t length) {
    return const_cast<std::atomic<int>*>(std::as_const(*this).misses_of(length));
  }
  // Whether read() asks the page cache for `t` by reading it without waiting: a task of a file with a size (a
  // /proc file or a device without one is read as it is), while the file's reads of its class find their
  // pages cached.
  bool reads_cached_first(const SourceRequest& request, const Task& t) const {
    return request.extent.known && reads_from_memory(t.length);
  }
  // Moves the score of `t`'s class toward misses or hits, if it has one.
  void note_cached(const Task& t, bool cached) {
    if (std::atomic<int>* misses = misses_of(t.length)) note_read(*misses, cached);
  }
  // Moves a score toward misses or hits (saturating; a racy update only loses a step). A saturated score is
  // not written, so that a steady state costs the readers no shared store.
  static void note_read(std::atomic<int>& misses, bool cached) {
    const int now = misses.load(std::memory_order_relaxed);
    const int next = std::clamp(now + (cached ? -1 : 1), -kSmallReadMemory, kSmallReadMemory);
    if (next != now) misses.store(next, std::memory_order_relaxed);
  }
  Status transfer_error(const char* verb, const char* prep, std::uint64_t length, std::uint64_t offset,
                        const char* route_label, bool direct, int err) const;

  Syscalls& sys_;
  FileDescriptors fds_;
  const std::string path_;
  const DirectIo policy_;
  const IoEngine engine_;
  std::atomic<bool> uring_refused_{false};  // the kernel refused io_uring once: pread from then on
  std::atomic<bool> cache_probe_unsupported_{false};  // the page cache cannot be asked: buffered reads
  std::atomic<bool> nowait_unsupported_{false};  // RWF_NOWAIT refused once: small reads probe as large ones
  std::atomic<int> small_read_misses_{0};  // small reads' recent misses less hits, in +-kSmallReadMemory
  std::atomic<int> probed_misses_{1};  // the same for larger reads up to kMostGatheredBytes (none probed yet: not
                                       // known to come from memory)
};

}  // namespace ferry::detail
