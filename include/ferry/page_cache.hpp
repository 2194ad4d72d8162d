// ferry/page_cache.hpp: how much of a file the kernel's page cache holds, and dropping it without root
// (for benchmarks, loaders deciding what to prefetch, and tests of cold reads).
// Thread safety: both functions may be called from any thread; they open `path` themselves.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "ferry/status.hpp"

namespace ferry::page_cache {

/// What the page cache holds of a range of a file. Counted in pages: a page partly inside the range counts
/// whole, so cached_bytes is (cached pages × page_bytes) capped at range_bytes, and is exact for ranges
/// that start and end on page boundaries (or at the end of the file).
struct Residency {
  std::uint64_t cached_bytes = 0;  // bytes of the range in the page cache
  std::uint64_t range_bytes = 0;   // bytes of the range inside the file (the range is cut at the end of the file)
  std::uint64_t page_bytes = 4096;  // the kernel's page size: 4096 on x86-64, up to 64 KiB on arm64
  std::string method;              // "cachestat" (Linux 6.5 and later) or "mincore" (a read-only mapping)
  /// cached_bytes / range_bytes, 1.0 for an empty range.
  double fraction() const { return range_bytes == 0 ? 1.0 : static_cast<double>(cached_bytes) / range_bytes; }
};

inline constexpr std::uint64_t kToEnd = std::numeric_limits<std::uint64_t>::max();

/// How much of [offset, offset + length) of `path` is in the page cache, without reading it or starting
/// readahead: cachestat(2) where the kernel has it, else mincore(2) on a mapping of the range. `length`
/// kToEnd (the default) means to the end of the file; a range past the end of the file is empty (no
/// error). Errors: not_found, permission_denied (naming the path), invalid_argument for a directory or a
/// file that cannot be mapped (a FIFO, most /proc files), and the kernel's error otherwise.
[[nodiscard]] Result<Residency> residency(const std::string& path, std::uint64_t offset = 0,
                                          std::uint64_t length = kToEnd);

/// Asks the kernel to drop `path`'s pages from the page cache (posix_fadvise POSIX_FADV_DONTNEED on the
/// whole file), then returns what is still cached. Dirty pages (written, not yet on the device) cannot be
/// dropped: with `write_back_first` (the default) the file is fdatasync()ed first so that they can be;
/// without it they stay cached. The kernel may also keep pages mapped or locked by any process, and pages
/// another process reads meanwhile come back, so check the returned residency when it matters. Needs only
/// read permission. Errors: as residency(), plus io_error from fdatasync.
[[nodiscard]] Result<Residency> evict(const std::string& path, bool write_back_first = true);

}  // namespace ferry::page_cache
