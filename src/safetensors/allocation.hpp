// Allocation's way in: blocks of device memory (cuMemAlloc in the device's primary context) or host
// memory (page-aligned, for O_DIRECT: base/host_memory.hpp), and their release.
#pragma once

#include <memory>

#include "ferry/safetensors.hpp"
#include "platform/gpu_platform.hpp"

namespace ferry::safetensors::detail {

class AllocationAccess {
 public:
  /// `size_bytes` of memory on `device` (kHostMemory: page-aligned host memory). Zero bytes still gives
  /// a valid, distinct pointer. Errors: unavailable without CUDA (naming why); the driver's
  /// (CUDA_ERROR_OUT_OF_MEMORY as unavailable, a bad ordinal as invalid_argument); unavailable (ENOMEM) for
  /// host memory.
  [[nodiscard]] static Result<std::shared_ptr<Allocation>> allocate(const ferry::detail::GpuPlatform& gpu, int device,
                                                                    std::uint64_t size_bytes);
  static void release(Allocation& a) noexcept;
};

}  // namespace ferry::safetensors::detail
