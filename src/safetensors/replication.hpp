// Copies of a region that was just read into one GPU onto further GPUs, piece by piece while the next
// piece is read: cuMemcpyPeerAsync on one stream per target GPU, with peer access enabled both ways where
// the GPUs allow it (without it, the driver stages peer copies through host memory). Enabling peer access
// is a property of the primary contexts and stays on after the load, as it does after PyTorch's own
// cross-GPU copies.
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "platform/cuda/cuda_api.hpp"

namespace ferry::safetensors::detail {

class Replicator {
 public:
  struct Target {
    int device = 0;
    ferry::detail::CUdeviceptr base = 0;
  };

  /// Prepares copies from `source_base` on `source_device` to every target. `notes` receives a line per
  /// pair of GPUs without peer access. Errors: the driver's (contexts, streams, peer access refused).
  [[nodiscard]] static Result<std::unique_ptr<Replicator>> start(const ferry::detail::CudaApi& api,
                                                                 int source_device,
                                                                 ferry::detail::CUdeviceptr source_base,
                                                                 std::vector<Target> targets,
                                                                 std::vector<std::string>* notes);
  ~Replicator();
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  /// Queues copies of [offset, offset + bytes) of the source region to the same offset of every target.
  /// The source bytes must be complete (the read that wrote them has finished).
  Status copy(std::uint64_t offset, std::uint64_t bytes);
  /// Waits for every queued copy and frees the streams. Errors: the first failed copy.
  Status finish();
  std::uint64_t bytes_copied() const { return bytes_copied_; }

 private:
  struct Lane {
    Target target;
    ferry::detail::CUcontext context = nullptr;
    ferry::detail::CUstream stream = nullptr;
  };
  Replicator(const ferry::detail::CudaApi& api, int source_device) : api_(api), source_device_(source_device) {}
  void destroy_streams() noexcept;

  const ferry::detail::CudaApi& api_;
  int source_device_;
  ferry::detail::CUdeviceptr source_base_ = 0;
  ferry::detail::CUcontext source_context_ = nullptr;
  std::vector<Lane> lanes_;
  std::uint64_t bytes_copied_ = 0;
};

}  // namespace ferry::safetensors::detail
