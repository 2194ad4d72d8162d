#include "platform/cuda/buffer_kind.hpp"

#include <cstdint>

#include <fmt/format.h>

namespace ferry::detail {

const char* memory_kind_name(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::host_pageable: return "host-pageable";
    case MemoryKind::host_pinned: return "host-pinned";
    case MemoryKind::device: return "device";
    case MemoryKind::managed: return "managed";
  }
  return "unknown";
}

Result<BufferKind> classify_buffer(const CudaApi* api, const void* ptr, std::uint64_t size) {
  if (api == nullptr || ptr == nullptr) return BufferKind{};

  // cuPointerGetAttributes, unlike cuPointerGetAttribute, answers CUDA_SUCCESS with zeroed values for a
  // pointer CUDA does not know: that is how pageable host memory shows itself. It needs no current
  // context, so a caller's fresh thread can ask.
  unsigned int memory_type = 0;
  int device_ordinal = -1;
  unsigned int is_managed = 0;  // the driver writes this boolean as 32 bits
  CUdeviceptr range_start = 0;
  std::size_t range_size = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* values[] = {&memory_type, &device_ordinal, &is_managed, &range_start, &range_size};
  auto address = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(ptr));
  CUresult result = api->cuPointerGetAttributes(5, attributes, values, address);
  // Older drivers answer INVALID_VALUE for memory outside every CUDA allocation: still plain host memory.
  if (result == CUDA_ERROR_INVALID_VALUE) return BufferKind{};
  FERRY_RETURN_IF_ERROR(cuda_check(*api, result, "cuPointerGetAttributes"));

  BufferKind kind;
  if (is_managed != 0 || memory_type == CU_MEMORYTYPE_UNIFIED) {
    kind = BufferKind{MemoryKind::managed, device_ordinal, range_start, range_size};
  } else if (memory_type == CU_MEMORYTYPE_DEVICE) {
    kind = BufferKind{MemoryKind::device, device_ordinal, range_start, range_size};
  } else if (memory_type == CU_MEMORYTYPE_HOST) {
    return BufferKind{MemoryKind::host_pinned, -1};
  } else {
    return BufferKind{};
  }
  // A producer's claimed size is not proof: the whole range must lie in the one allocation that holds
  // `ptr`, or Ferry would write into whatever follows it on the GPU.
  const std::uint64_t first = address;
  const std::uint64_t alloc_end = static_cast<std::uint64_t>(range_start) + range_size;
  if (size > 0 && range_size > 0 && (first < range_start || size > alloc_end - first)) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("the GPU {} buffer at {:#x} of {} bytes does not fit in its allocation: the driver "
                              "says the allocation holding it is {} bytes at {:#x}, so only {} bytes from the "
                              "pointer are usable",
                              kind.device, first, size, range_size, static_cast<std::uint64_t>(range_start),
                              first < range_start ? 0 : alloc_end - first),
                  EINVAL);
  }
  return kind;
}

}  // namespace ferry::detail
