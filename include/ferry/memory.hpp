// What a pointer is to CUDA, and waiting for a CUDA stream: the checks a binding makes before it hands
// memory to Ferry (Ferry's own requests classify their buffers themselves, the same way).
#pragma once

#include <cstdint>
#include <string>

#include "ferry/status.hpp"

namespace ferry {

struct MemoryInfo {
  std::string kind;  // "host-pageable" (memory CUDA has never seen), "host-pinned", "device", "managed"
  int device = -1;   // the CUDA device of device and managed memory; -1 for host memory
  std::uint64_t allocation_start = 0, allocation_size = 0;  // device and managed memory: its allocation
};

/// OK where the CUDA driver loads and starts in this process (loading it if nothing has yet); otherwise
/// unavailable, saying why ("libcuda.so.1 not found: ...").
[[nodiscard]] Status cuda_driver_status();

/// What the CUDA driver knows about `address`. Errors: unavailable without a usable CUDA driver (the
/// reason from loading it), or the driver's own failure ("cuPointerGetAttributes failed: ...").
[[nodiscard]] Result<MemoryInfo> describe_memory(const void* address);

/// Waits for the work queued on `stream` (a CUstream; 1 is the legacy default stream, 2 the per-thread
/// one) of `device`'s primary context, whatever context the calling thread has (it is left as it was).
[[nodiscard]] Status synchronize_stream(void* stream, int device);

}  // namespace ferry
