// ferry_tooling/host_memory.hpp: page-aligned host memory, the one helper for Ferry's tools (the CLI, the
// benchmark, the doctor's probe), the library's safetensors loads and saves into host memory, and the tests.
//
// Part of ferry_tooling (see device_memory.hpp for who may use it). The memory is anonymous memory of its own
// mapping: page-aligned, so that an O_DIRECT read can land in it directly; whole pages (zero bytes still give
// one page, so a valid and distinct pointer); zero-filled; on transparent huge pages where the kernel allows
// (MADV_HUGEPAGE), which halves the cost of pinning it and of O_DIRECT reads into it.
// Thread safety: a HostMemory is owned by one thread at a time; its bytes may be used from any thread.
#pragma once

#include <cstdint>

#include "ferry/status.hpp"

namespace ferry::tooling {

class HostMemory {
 public:
  /// When the pages are first touched: by the first use (the default), or before allocate() returns
  /// (MADV_POPULATE_WRITE), so that a timed transfer measures I/O rather than first-touch page faults.
  enum class Touch { on_use, now };

  /// `size_bytes` of page-aligned memory (see the top of this file). Errors: unavailable (ENOMEM, as
  /// Status::from_errno maps it) with "Could not allocate <size> of host memory".
  [[nodiscard]] static Result<HostMemory> allocate(std::uint64_t size_bytes, Touch touch = Touch::on_use);
  /// `size_bytes` (at least one page) of pinned memory for GPU `device`, from cuMemHostAlloc (portable, so any
  /// context may copy from it) through the process's CUDA driver. Errors: unavailable ("cannot use GPU N:
  /// <why>") without a usable driver; the driver's (pinned memory exhausted, a bad ordinal).
  [[nodiscard]] static Result<HostMemory> allocate_pinned(int device, std::uint64_t size_bytes);

  HostMemory(HostMemory&& o) noexcept;
  HostMemory& operator=(HostMemory&& o) noexcept;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  /// Unmaps (or, pinned, cuMemFreeHost) the memory; a failure is ignored.
  ~HostMemory();

  std::uint8_t* data() const { return data_; }
  /// The bytes asked for (the mapping may be larger: whole pages).
  std::uint64_t size_bytes() const { return size_bytes_; }
  bool pinned() const { return device_ >= 0; }

  /// Gives ownership of unpinned memory up (for a holder that keeps only a pointer, such as
  /// ferry::safetensors::Allocation); free it with free_released(data, size_bytes()). nullptr when pinned.
  [[nodiscard]] std::uint8_t* release();
  /// Frees what release() gave up; `size_bytes` is size_bytes() as it was then. nullptr is ignored.
  static void free_released(void* data, std::uint64_t size_bytes) noexcept;

 private:
  HostMemory(std::uint8_t* data, std::uint64_t size_bytes, int device)
      : data_(data), size_bytes_(size_bytes), device_(device) {}
  void free() noexcept;
  std::uint8_t* data_ = nullptr;  // null once moved from or released
  std::uint64_t size_bytes_ = 0;
  int device_ = -1;               // pinned for this GPU; -1: a mapping of our own
};

}  // namespace ferry::tooling
