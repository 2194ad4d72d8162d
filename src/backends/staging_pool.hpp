// Reusable staging kits for the staged route: pinned bounce buffers plus a stream and one event per
// buffer. Pinning memory costs far more than the copy it serves (measured: a third of the throughput when
// done inside the timed region), so kits are kept for the life of the process and handed out again.
//
// The buffers are anonymous memory on 2 MiB huge pages where the kernel gives them, pinned with
// cuMemHostRegister; cuMemHostAlloc, the fallback, hands out 4 KiB pages, and an O_DIRECT read into those
// reaches the disk in requests of at most max_segments pages (measured on a virtio disk with 254
// segments: 1.4 GiB/s into 4 KiB pages, 2.4 GiB/s into huge pages, same reads). On a machine with several
// NUMA nodes the region is placed on the node nearest the GPU (numa_placement.hpp).
// Thread safety: acquire/release may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ferry/status.hpp"
#include "platform/cuda/cuda_api.hpp"

namespace ferry::detail {

struct StagingKit {
  const CudaApi* api = nullptr;
  int device = -1;
  std::uint64_t buffer_size = 0;
  CUstream stream = nullptr;
  std::vector<void*> buffers;   // pinned host memory, page-aligned, buffer_size bytes each
  std::vector<CUevent> events;  // events[i] is recorded after the last copy that used buffers[i]
  int numa_node = -1;           // where the buffers were placed (the GPU's nearest node), or -1
  void* region = nullptr;       // the registered mapping holding every buffer, or null (cuMemHostAlloc)
  std::size_t region_bytes = 0;
  std::uint64_t pinned_bytes = 0;  // counted in StagingPool::pinned_bytes() until destroy_kit
};

class StagingPool {
 public:
  /// A kit for `device` with `count` buffers of `buffer_size` bytes. The caller's thread must have the
  /// device's context current. Errors: the driver's (pinned memory exhausted, ...).
  Result<std::unique_ptr<StagingKit>> acquire(const CudaApi& api, int device, std::uint64_t buffer_size,
                                              unsigned count);
  /// Gives a kit back. The kit's stream must be idle (synchronised).
  void release(std::unique_ptr<StagingKit> kit);
  /// Frees an acquired kit that cannot go back (its stream could not be synchronised): destroy_kit.
  void discard(std::unique_ptr<StagingKit> kit);
  /// Makes kits of this shape, one at a time and each into the pool as soon as it is made, until `kits`
  /// kits are idle in the pool or in use: a request of that many workers then pins nothing, and workers
  /// that start meanwhile (a load begun during a warm-up) take each kit as it comes instead of making
  /// their own. The caller's thread must have the device's context current.
  Status reserve(const CudaApi& api, int device, std::uint64_t buffer_size, unsigned count, unsigned kits);
  /// Frees every idle kit (tests use it for leak checks).
  void clear();
  /// Pinned bytes held by every kit that exists now, idle or in use (the soak watches it stay flat).
  static std::uint64_t pinned_bytes();

 private:
  std::unique_ptr<StagingKit> take_idle(const CudaApi& api, int device, std::uint64_t buffer_size, unsigned count);

  Result<std::unique_ptr<StagingKit>> make_kit(const CudaApi& api, int device, std::uint64_t buffer_size,
                                               unsigned count);
  // Whether `kits` kits of this shape are idle, counting every kit in use (of any shape) as one.
  bool holds(const CudaApi& api, int device, std::uint64_t buffer_size, unsigned count, unsigned kits);

  std::mutex mutex_;         // guards idle_ and in_use_
  std::mutex making_mutex_;  // one kit is made at a time (see acquire)
  std::vector<std::unique_ptr<StagingKit>> idle_;
  unsigned in_use_ = 0;      // kits acquired and not yet released or discarded (of any shape)
};

StagingPool& process_staging_pool();
/// Frees a kit's driver resources (best effort: used on error paths and by clear()).
void destroy_kit(StagingKit& kit);

}  // namespace ferry::detail
