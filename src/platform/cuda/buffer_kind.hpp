// What kind of memory a caller's buffer is: the first input of every routing decision.
// Thread safety: classify_buffer may be called from any thread.
#pragma once

#include <cstdint>

#include "ferry/status.hpp"
#include "platform/cuda/cuda_api.hpp"

namespace ferry::detail {

enum class MemoryKind { host_pageable, host_pinned, device, managed };

/// "host-pageable", "host-pinned", "device", "managed".
const char* memory_kind_name(MemoryKind kind) noexcept;

struct BufferKind {
  MemoryKind kind = MemoryKind::host_pageable;
  int device = -1;  // CUDA device ordinal for device and managed memory; -1 for host memory
  std::uint64_t range_start = 0, range_size = 0;  // device and managed memory: the allocation holding it
  /// True when [address, address + size) lies in the allocation this classification found.
  bool holds(std::uint64_t address, std::uint64_t size) const noexcept {
    if (range_size == 0 || address < range_start) return false;
    const std::uint64_t into = address - range_start;  // compared apart from size, so nothing wraps
    return into <= range_size && size <= range_size - into;
  }

  bool is_host() const noexcept { return kind == MemoryKind::host_pageable || kind == MemoryKind::host_pinned; }
};

/// Asks the driver what `ptr` points into. With api == nullptr (no CUDA here) every buffer is host
/// pageable. Host memory CUDA has never seen (malloc, mmap, the stack) is host_pageable, not an error;
/// memory from cuMemHostAlloc or cuMemHostRegister is host_pinned; cuMemAlloc memory is device; managed
/// (unified) memory is managed, with the device it was allocated on.
/// For device and managed memory with `size` > 0, also checks that [ptr, ptr + size) lies inside the one
/// allocation holding `ptr` (the driver's range attributes).
/// Errors: invalid_argument naming the pointer, the size and the allocation when the range does not fit;
/// the driver's own failure (unavailable when the driver is not initialised or gone, ...), as
/// "cuPointerGetAttributes failed: ...".
[[nodiscard]] Result<BufferKind> classify_buffer(const CudaApi* api, const void* ptr, std::uint64_t size = 0);

}  // namespace ferry::detail
