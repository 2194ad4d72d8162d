// DeviceBuffer over the loaded CUDA driver table.
#include "device_memory.hpp"

#include <fmt/format.h>

#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry::cli {

using detail::process_cuda_api;

Result<DeviceBuffer> DeviceBuffer::allocate(int device, std::uint64_t size) {
  const detail::CudaApi* api = process_cuda_api();
  if (api == nullptr) {
    Status why = detail::process_cuda_status();
    return Status(ErrorCode::unavailable, fmt::format("cannot use GPU {}: {}", device, why.message()));
  }
  FERRY_RETURN_IF_ERROR(detail::make_current(*api, device));
  detail::CUdeviceptr ptr = 0;
  FERRY_RETURN_IF_ERROR(detail::cuda_check(*api, api->cuMemAlloc_v2(&ptr, std::max<std::uint64_t>(size, 1)),
                                           fmt::format("cuMemAlloc of {} bytes on GPU {}", size, device)));
  return DeviceBuffer(device, ptr);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : device_(o.device_), ptr_(o.ptr_) { o.ptr_ = 0; }

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ == 0) return;
  const detail::CudaApi* api = process_cuda_api();
  if (api && detail::make_current(*api, device_).ok()) (void)api->cuMemFree_v2(ptr_);
}

Status DeviceBuffer::copy_to_host(void* dst, std::uint64_t size) const {
  const detail::CudaApi* api = process_cuda_api();
  FERRY_RETURN_IF_ERROR(detail::make_current(*api, device_));
  return detail::cuda_check(*api, api->cuMemcpyDtoH_v2(dst, ptr_, size), "cuMemcpyDtoH");
}

Status DeviceBuffer::copy_from_host(const void* src, std::uint64_t size) {
  const detail::CudaApi* api = process_cuda_api();
  FERRY_RETURN_IF_ERROR(detail::make_current(*api, device_));
  return detail::cuda_check(*api, api->cuMemcpyHtoD_v2(ptr_, src, size), "cuMemcpyHtoD");
}

}  // namespace ferry::cli
