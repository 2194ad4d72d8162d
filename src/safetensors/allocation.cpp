// Allocation: device memory through the CUDA table, host memory from base/host_memory.hpp.
#include "safetensors/allocation.hpp"

#include <fmt/format.h>

#include "base/host_memory.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry::safetensors {
namespace detail {

using ferry::detail::CudaApi;
using ferry::detail::CUdeviceptr;

Result<std::shared_ptr<Allocation>> AllocationAccess::allocate(const ferry::detail::GpuPlatform& gpu, int device,
                                                               std::uint64_t size_bytes) {
  std::shared_ptr<Allocation> a(new Allocation);
  a->device_ = device;
  a->size_ = size_bytes;
  if (device == kHostMemory) {
    FERRY_ASSIGN_OR_RETURN(ferry::detail::HostMemory host, ferry::detail::HostMemory::allocate(size_bytes));
    a->data_ = host.release();  // freed by release() below
    return a;
  }
  Status why;
  const CudaApi* api = gpu.cuda(&why);
  if (api == nullptr) {
    return Status(ErrorCode::unavailable,
                  fmt::format("Could not allocate {} on GPU {}: CUDA is not usable here: {}", format_size(size_bytes),
                              device, why.ok() ? "no CUDA driver" : why.message()));
  }
  ferry::detail::ScopedDeviceContext context(*api, device);
  FERRY_RETURN_IF_ERROR(context.status());
  CUdeviceptr ptr = 0;
  FERRY_RETURN_IF_ERROR(ferry::detail::cuda_check(
      *api, api->cuMemAlloc_v2(&ptr, std::max<std::uint64_t>(size_bytes, 1)),
      fmt::format("Allocating {} on GPU {} (cuMemAlloc)", format_size(size_bytes), device)));
  a->data_ = reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr));
  a->api_ = api;
  return a;
}

void AllocationAccess::release(Allocation& a) noexcept {
  if (a.data_ == nullptr) return;
  if (a.device_ == kHostMemory) {
    ferry::detail::HostMemory::free_released(a.data_, a.size_);
  } else if (a.api_ != nullptr) {
    const auto& api = *static_cast<const CudaApi*>(a.api_);
    ferry::detail::ScopedDeviceContext context(api, a.device_);
    (void)api.cuMemFree_v2(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(a.data_)));
  }
  a.data_ = nullptr;
}

}  // namespace detail

Allocation::~Allocation() { detail::AllocationAccess::release(*this); }

}  // namespace ferry::safetensors
