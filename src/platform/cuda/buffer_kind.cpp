#include "platform/cuda/buffer_kind.hpp"

#include <cstdint>

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

Result<BufferKind> classify_buffer(const CudaApi* api, const void* ptr) {
  if (api == nullptr || ptr == nullptr) return BufferKind{};

  // cuPointerGetAttributes, unlike cuPointerGetAttribute, answers CUDA_SUCCESS with zeroed values for a
  // pointer CUDA does not know: that is how pageable host memory shows itself.
  unsigned int memory_type = 0;
  int device_ordinal = -1;
  unsigned int is_managed = 0;  // the driver writes this boolean as 32 bits
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* values[] = {&memory_type, &device_ordinal, &is_managed};
  auto address = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(ptr));
  CUresult result = api->cuPointerGetAttributes(3, attributes, values, address);
  // Older drivers answer INVALID_VALUE for memory outside every CUDA allocation: still plain host memory.
  if (result == CUDA_ERROR_INVALID_VALUE) return BufferKind{};
  FERRY_RETURN_IF_ERROR(cuda_check(*api, result, "cuPointerGetAttributes"));

  if (is_managed != 0) return BufferKind{MemoryKind::managed, device_ordinal};
  switch (memory_type) {
    case CU_MEMORYTYPE_DEVICE:
      return BufferKind{MemoryKind::device, device_ordinal};
    case CU_MEMORYTYPE_UNIFIED:
      return BufferKind{MemoryKind::managed, device_ordinal};
    case CU_MEMORYTYPE_HOST:
      return BufferKind{MemoryKind::host_pinned, -1};
    default:
      return BufferKind{};
  }
}

}  // namespace ferry::detail
