// Device memory for Ferry's tools: see platform/cuda/device_memory.hpp.
#include "platform/cuda/device_memory.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry::detail {
namespace {

Result<const CudaApi*> process_cuda(int device) {
  const CudaApi* cuda = process_cuda_api();
  if (cuda == nullptr) {
    return Status(ErrorCode::unavailable,
                  fmt::format("cannot use GPU {}: {}", device, process_cuda_status().message()));
  }
  return cuda;
}

CUdeviceptr address_of(const void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
}

}  // namespace

Result<DeviceMemory> DeviceMemory::allocate(int device, std::uint64_t size_bytes) {
  FERRY_ASSIGN_OR_RETURN(const CudaApi* cuda, process_cuda(device));
  return allocate(*cuda, device, size_bytes);
}

Result<DeviceMemory> DeviceMemory::allocate(const CudaApi& cuda, int device, std::uint64_t size_bytes) {
  ScopedDeviceContext context(cuda, device);
  FERRY_RETURN_IF_ERROR(context.status());
  CUdeviceptr address = 0;
  FERRY_RETURN_IF_ERROR(cuda_check(cuda, cuda.cuMemAlloc_v2(&address, std::max<std::uint64_t>(size_bytes, 1)),
                                   fmt::format("cuMemAlloc of {} bytes on GPU {}", size_bytes, device)));
  return DeviceMemory(&cuda, device, address, size_bytes);
}

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : cuda_(other.cuda_), device_(other.device_), address_(other.address_), size_bytes_(other.size_bytes_) {
  other.address_ = 0;
}

DeviceMemory::~DeviceMemory() {
  if (address_ == 0) return;
  ScopedDeviceContext context(*cuda_, device_);
  if (context.status().ok()) (void)cuda_->cuMemFree_v2(address_);
}

Status DeviceMemory::copy_to_host(void* dst, std::uint64_t size) const {
  ScopedDeviceContext context(*cuda_, device_);
  FERRY_RETURN_IF_ERROR(context.status());
  return cuda_check(*cuda_, cuda_->cuMemcpyDtoH_v2(dst, address_, size), "cuMemcpyDtoH");
}

Status DeviceMemory::copy_from_host(const void* src, std::uint64_t size) {
  ScopedDeviceContext context(*cuda_, device_);
  FERRY_RETURN_IF_ERROR(context.status());
  return cuda_check(*cuda_, cuda_->cuMemcpyHtoD_v2(address_, src, size), "cuMemcpyHtoD");
}

Status DeviceMemory::fill(std::uint8_t value, std::uint64_t size) {
  ScopedDeviceContext context(*cuda_, device_);
  FERRY_RETURN_IF_ERROR(context.status());
  FERRY_RETURN_IF_ERROR(cuda_check(*cuda_, cuda_->cuMemsetD8_v2(address_, value, size), "cuMemsetD8"));
  // cuMemsetD8 may return before the bytes are set; the caller is promised they are.
  return cuda_check(*cuda_, cuda_->cuCtxSynchronize(), "cuCtxSynchronize");
}

Status copy_device_to_host(int device, const void* src, void* dst, std::uint64_t size) {
  FERRY_ASSIGN_OR_RETURN(const CudaApi* cuda, process_cuda(device));
  ScopedDeviceContext context(*cuda, device);
  FERRY_RETURN_IF_ERROR(context.status());
  return cuda_check(*cuda, cuda->cuMemcpyDtoH_v2(dst, address_of(src), size), "cuMemcpyDtoH");
}

}  // namespace ferry::detail
