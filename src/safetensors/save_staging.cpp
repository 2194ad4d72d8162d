// SaveStaging: pooled pinned kits or the save's own host memory, and a copy stream per GPU.
#include "safetensors/save_staging.hpp"

#include <utility>

#include <fmt/format.h>

#include "ferry/safetensors.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry::safetensors::detail {

using ferry::detail::CudaApi;
using ferry::detail::CUstream;

Result<SaveStaging> SaveStaging::make(const CudaApi* api, int device, std::size_t windows) {
  SaveStaging s;
  if (api == nullptr) {
    FERRY_ASSIGN_OR_RETURN(ferry::detail::HostMemory host, ferry::detail::HostMemory::allocate(windows * kSaveWindowBytes));
    s.host_.emplace(std::move(host));
    char* base = reinterpret_cast<char*>(s.host_->data());
    for (std::size_t i = 0; i < windows; ++i) s.windows_.push_back(base + i * kSaveWindowBytes);
    return s;
  }
  s.api_ = api;
  s.device_ = device;
  ferry::detail::ScopedDeviceContext context(*api, device);
  FERRY_RETURN_IF_ERROR(context.status());
  // Kits of at most kWindowsPerKit windows, taken all at once (a save holding some while it waited for
  // the rest could wait for another that holds the rest).
  std::vector<unsigned> counts;
  for (std::size_t left = windows; left > 0;) {
    counts.push_back(static_cast<unsigned>(std::min<std::size_t>(left, kWindowsPerKit)));
    left -= counts.back();
  }
  FERRY_ASSIGN_OR_RETURN(s.kits_, ferry::detail::process_staging_pool().acquire({api, device, kSaveWindowBytes}, counts,
                                                                               &s.pinned_wait_ns_));
  for (const auto& kit : s.kits_) {
    for (void* b : kit->buffers) s.windows_.push_back(static_cast<char*>(b));
  }
  return s;
}

SaveStaging::SaveStaging(SaveStaging&& o) noexcept
    : api_(std::exchange(o.api_, nullptr)),
      device_(o.device_),
      kits_(std::move(o.kits_)),
      host_(std::move(o.host_)),
      windows_(std::move(o.windows_)),
      own_streams_(std::move(o.own_streams_)),
      pinned_wait_ns_(o.pinned_wait_ns_) {}

SaveStaging::~SaveStaging() {
  if (api_ == nullptr) return;
  for (auto& [device, stream] : own_streams_) {
    ferry::detail::ScopedDeviceContext context(*api_, device);
    if (context.status().ok()) (void)api_->cuStreamDestroy_v2(stream);
  }
  ferry::detail::ScopedDeviceContext context(*api_, device_);
  for (auto& kit : kits_) {
    // A kit goes back to the pool only with its stream idle; one that cannot be synchronised is freed.
    if (context.status().ok() && api_->cuStreamSynchronize(kit->stream) == ferry::detail::CUDA_SUCCESS) {
      ferry::detail::process_staging_pool().release(std::move(kit));
    } else {
      ferry::detail::process_staging_pool().release(std::move(kit), /*destroy=*/true);
    }
  }
}

std::uint64_t SaveStaging::bytes() const { return windows_.size() * kSaveWindowBytes; }

Result<CUstream> SaveStaging::stream_for(int device) {
  if (api_ == nullptr) return Status(ErrorCode::internal, "a host-memory save has no copy streams");
  if (device == device_) return kits_.front()->stream;
  auto it = own_streams_.find(device);
  if (it != own_streams_.end()) return it->second;
  CUstream stream = nullptr;
  // Blocking, as the pool's: copies wait for work queued on the legacy default stream.
  FERRY_RETURN_IF_ERROR(ferry::detail::cuda_check(*api_, api_->cuStreamCreate(&stream, 0),
                                                  fmt::format("cuStreamCreate for GPU {}", device)));
  own_streams_.emplace(device, stream);
  return stream;
}

}  // namespace ferry::safetensors::detail
