// Page-aligned host memory, the one helper for it: the library's safetensors loads and saves into host
// memory, the doctor's probe, the tools (the CLI, the benchmark; one of the headers of src/ they may include)
// and the tests. Pinned memory for a GPU is the platform's: platform/cuda/pinned_memory.hpp.
//
// The memory is anonymous memory of its own mapping: page-aligned, so that an O_DIRECT read can land in it
// directly; whole pages (zero bytes still give one page, so a valid and distinct pointer); zero-filled; on
// transparent huge pages where the kernel allows (MADV_HUGEPAGE), which halves the cost of pinning it and of
// O_DIRECT reads into it.
// Thread safety: a HostMemory is owned by one thread at a time; its bytes may be used from any thread.
#pragma once

#include <cstdint>

#include "ferry/status.hpp"

namespace ferry::detail {

/// The kernel's page size (sysconf): 4 KiB on x86-64; 4, 16 or 64 KiB on arm64 (Grace machines often run 64 KiB
/// pages). The unit of mmap offsets, madvise ranges, mincore's entries and cachestat's counts.
std::uint64_t system_page_bytes();

class HostMemory {
 public:
  /// When the pages are first touched: by the first use (the default), or before allocate() returns
  /// (MADV_POPULATE_WRITE), so that a timed transfer measures I/O rather than first-touch page faults.
  enum class Touch { on_use, now };

  /// `size_bytes` of page-aligned memory (see the top of this file). Errors: unavailable (ENOMEM, as
  /// Status::from_errno maps it) with "Could not allocate <size> of host memory".
  [[nodiscard]] static Result<HostMemory> allocate(std::uint64_t size_bytes, Touch touch = Touch::on_use);

  HostMemory(HostMemory&& o) noexcept;
  HostMemory& operator=(HostMemory&& o) noexcept;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  /// Unmaps the memory; a failure is ignored.
  ~HostMemory();

  std::uint8_t* data() const { return data_; }
  /// The bytes asked for (the mapping may be larger: whole pages).
  std::uint64_t size_bytes() const { return size_bytes_; }

  /// Gives ownership up (for a holder that keeps only a pointer, such as ferry::safetensors::Allocation);
  /// free it with free_released(data, size_bytes()).
  [[nodiscard]] std::uint8_t* release();
  /// Frees what release() gave up; `size_bytes` is size_bytes() as it was then. nullptr is ignored.
  static void free_released(void* data, std::uint64_t size_bytes) noexcept;

  /// What `size_bytes` of host memory takes: whole pages of system_page_bytes(), at least one (pinned memory is
  /// sized so too).
  static std::uint64_t whole_pages(std::uint64_t size_bytes);

 private:
  HostMemory(std::uint8_t* data, std::uint64_t size_bytes) : data_(data), size_bytes_(size_bytes) {}
  std::uint8_t* data_ = nullptr;  // null once moved from or released
  std::uint64_t size_bytes_ = 0;
};

}  // namespace ferry::detail
