// Pinned host memory for one GPU: see platform/cuda/pinned_memory.hpp.
#include "platform/cuda/pinned_memory.hpp"

#include <utility>

#include <fmt/format.h>

#include "base/host_memory.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry::detail {

Result<PinnedMemory> PinnedMemory::allocate(int device, std::uint64_t size_bytes) {
  const CudaApi* api = process_cuda_api();
  if (api == nullptr) {
    return Status(ErrorCode::unavailable,
                  fmt::format("cannot use GPU {}: {}", device, process_cuda_status().message()));
  }
  ScopedDeviceContext context(*api, device);
  FERRY_RETURN_IF_ERROR(context.status());
  const std::uint64_t bytes = HostMemory::whole_pages(size_bytes);
  void* p = nullptr;
  FERRY_RETURN_IF_ERROR(cuda_check(*api, api->cuMemHostAlloc(&p, bytes, kMemHostAllocPortable),
                                   fmt::format("cuMemHostAlloc of {} bytes", bytes)));
  return PinnedMemory(static_cast<std::uint8_t*>(p), size_bytes, device);
}

PinnedMemory::PinnedMemory(PinnedMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_bytes_(o.size_bytes_), device_(o.device_) {}

PinnedMemory::~PinnedMemory() {
  if (data_ == nullptr) return;
  if (const CudaApi* api = process_cuda_api()) {
    ScopedDeviceContext context(*api, device_);
    if (context.status().ok()) (void)api->cuMemFreeHost(data_);
  }
}

}  // namespace ferry::detail
