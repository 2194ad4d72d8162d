// Replicator: peer copies onto further GPUs.
#include "safetensors/replication.hpp"

#include <fmt/format.h>

#include "platform/cuda/primary_context.hpp"

namespace ferry::safetensors::detail {

using ferry::detail::cuda_check;
using ferry::detail::CudaApi;
using ferry::detail::CUdevice;
using ferry::detail::ScopedDeviceContext;

namespace {

// Lets the context of `device` reach `peer`'s memory. Already enabled counts as done.
Status enable_peer(const CudaApi& api, int device, ferry::detail::CUcontext peer_context, int peer) {
  ScopedDeviceContext context(api, device);
  FERRY_RETURN_IF_ERROR(context.status());
  ferry::detail::CUresult r = api.cuCtxEnablePeerAccess(peer_context, 0);
  if (r == ferry::detail::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return Status();
  return cuda_check(api, r, fmt::format("Enabling peer access from GPU {} to GPU {} (cuCtxEnablePeerAccess)", device, peer));
}

Result<bool> peer_capable(const CudaApi& api, int a, int b) {
  CUdevice da = 0, db = 0;
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceGet(&da, a), "cuDeviceGet"));
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceGet(&db, b), "cuDeviceGet"));
  int ab = 0, ba = 0;
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceCanAccessPeer(&ab, da, db), "cuDeviceCanAccessPeer"));
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceCanAccessPeer(&ba, db, da), "cuDeviceCanAccessPeer"));
  return ab != 0 && ba != 0;
}

}  // namespace

Result<std::unique_ptr<Replicator>> Replicator::start(const CudaApi& api, int source_device,
                                                      ferry::detail::CUdeviceptr source_base,
                                                      std::vector<Target> targets, std::vector<std::string>* notes) {
  std::unique_ptr<Replicator> r(new Replicator(api, source_device));
  r->source_base_ = source_base;
  FERRY_ASSIGN_OR_RETURN(r->source_context_, ferry::detail::primary_context(api, source_device));
  for (const Target& t : targets) {
    Lane lane;
    lane.target = t;
    FERRY_ASSIGN_OR_RETURN(lane.context, ferry::detail::primary_context(api, t.device));
    FERRY_ASSIGN_OR_RETURN(bool capable, peer_capable(api, source_device, t.device));
    if (capable) {
      FERRY_RETURN_IF_ERROR(enable_peer(api, t.device, r->source_context_, source_device));
      FERRY_RETURN_IF_ERROR(enable_peer(api, source_device, lane.context, t.device));
    } else if (notes) {
      notes->push_back(fmt::format("GPU {} and GPU {} have no peer access (cuDeviceCanAccessPeer): the driver copies "
                                   "between them through host memory",
                                   source_device, t.device));
    }
    ScopedDeviceContext context(api, t.device);
    FERRY_RETURN_IF_ERROR(context.status());
    FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuStreamCreate(&lane.stream, ferry::detail::CU_STREAM_NON_BLOCKING),
                                     fmt::format("Creating a stream on GPU {}", t.device)));
    r->lanes_.push_back(lane);
  }
  return r;
}

Status Replicator::copy(std::uint64_t offset, std::uint64_t bytes) {
  if (bytes == 0) return Status();
  for (Lane& lane : lanes_) {
    ScopedDeviceContext context(api_, lane.target.device);
    FERRY_RETURN_IF_ERROR(context.status());
    FERRY_RETURN_IF_ERROR(cuda_check(
        api_,
        api_.cuMemcpyPeerAsync(lane.target.base + offset, lane.context, source_base_ + offset, source_context_, bytes,
                               lane.stream),
        fmt::format("Copying {} bytes at offset {} from GPU {} to GPU {} (cuMemcpyPeerAsync)", bytes, offset,
                    source_device_, lane.target.device)));
    bytes_copied_ += bytes;
  }
  return Status();
}

Status Replicator::finish() {
  Status first;
  for (Lane& lane : lanes_) {
    if (lane.stream == nullptr) continue;
    ScopedDeviceContext context(api_, lane.target.device);
    Status s = context.status();
    if (s.ok()) {
      s = cuda_check(api_, api_.cuStreamSynchronize(lane.stream),
                     fmt::format("Waiting for copies from GPU {} to GPU {}", source_device_, lane.target.device));
    }
    if (first.ok() && !s.ok()) first = s;
  }
  destroy_streams();
  return first;
}

void Replicator::destroy_streams() noexcept {
  for (Lane& lane : lanes_) {
    if (lane.stream == nullptr) continue;
    ScopedDeviceContext context(api_, lane.target.device);
    // Destroying a stream lets its queued copies finish first, so nothing writes into a target later.
    (void)api_.cuStreamSynchronize(lane.stream);
    (void)api_.cuStreamDestroy_v2(lane.stream);
    lane.stream = nullptr;
  }
}

Replicator::~Replicator() { destroy_streams(); }

}  // namespace ferry::safetensors::detail
