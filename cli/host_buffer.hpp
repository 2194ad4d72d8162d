// Page-aligned host memory for the CLI: aligned so that O_DIRECT can land in it directly, backed by
// huge pages where the kernel allows, and (unless told otherwise) touched before use so that timing
// measures I/O rather than the first-touch page faults of a fresh allocation.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <memory>

namespace ferry::cli {

struct Unmapper {
  std::uint64_t size = 0;
  void operator()(std::uint8_t* p) const {
    if (p) ::munmap(p, size);
  }
};
using HostBuffer = std::unique_ptr<std::uint8_t[], Unmapper>;

/// nullptr when the memory cannot be had. `populate` false leaves the pages to be made as bytes arrive:
/// for a size a server claims, which must not become resident before the bytes do.
inline HostBuffer allocate_host(std::uint64_t size, bool populate = true) {
  std::uint64_t rounded = (std::max<std::uint64_t>(size, 1) + 4095) / 4096 * 4096;
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return HostBuffer(nullptr, Unmapper{0});
  (void)::madvise(p, rounded, MADV_HUGEPAGE);
  // Populate after the advice so that the populated pages can be huge ones.
  if (populate) (void)::madvise(p, rounded, MADV_POPULATE_WRITE);
  return HostBuffer(static_cast<std::uint8_t*>(p), Unmapper{rounded});
}

}  // namespace ferry::cli
