// Pinned host memory for one GPU, from cuMemHostAlloc through the process's CUDA driver: for the benchmark's
// host buffer, so that its raw I/O baseline lands where the staged route's bounce buffers would (one of the
// headers of src/ the tools may include). Page-aligned host memory without a GPU is base/host_memory.hpp;
// the engine's own bounce buffers are the staging pool's (src/backends/staging_pool.hpp).
// Thread safety: a PinnedMemory is owned by one thread at a time; its bytes may be used from any thread.
#pragma once

#include <cstdint>

#include "ferry/status.hpp"

namespace ferry::detail {

class PinnedMemory {
 public:
  /// `size_bytes` (at least one page) of pinned memory for GPU `device`, portable (any context may copy from
  /// it), allocated in the device's primary context. Errors: unavailable ("cannot use GPU N: <why>") without a
  /// usable driver; the driver's (pinned memory exhausted, a bad ordinal).
  [[nodiscard]] static Result<PinnedMemory> allocate(int device, std::uint64_t size_bytes);

  PinnedMemory(PinnedMemory&& o) noexcept;
  PinnedMemory& operator=(PinnedMemory&&) = delete;
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  /// cuMemFreeHost; a failure is ignored (nothing could be done about it).
  ~PinnedMemory();

  std::uint8_t* data() const { return data_; }
  /// The bytes asked for (the allocation may be larger: whole pages).
  std::uint64_t size_bytes() const { return size_bytes_; }
  int device() const { return device_; }

 private:
  PinnedMemory(std::uint8_t* data, std::uint64_t size_bytes, int device)
      : data_(data), size_bytes_(size_bytes), device_(device) {}
  std::uint8_t* data_;  // null once moved from
  std::uint64_t size_bytes_;
  int device_;
};

}  // namespace ferry::detail
