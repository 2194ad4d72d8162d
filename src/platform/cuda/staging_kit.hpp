// Staging kits: pinned bounce buffers plus a stream and one event per buffer, made and freed through the
// CUDA driver. The staging pool (src/backends/staging_pool.hpp) keeps them for the life of the process.
//
// The buffers are anonymous memory on 2 MiB huge pages where the kernel gives them, pinned with
// cuMemHostRegister; cuMemHostAlloc, the fallback, hands out 4 KiB pages, and an O_DIRECT read into those
// reaches the disk in requests of at most max_segments pages (measured on a virtio disk with 254
// segments: 1.4 GiB/s into 4 KiB pages, 2.4 GiB/s into huge pages, same reads). On a machine with several
// NUMA nodes the region is placed on the node nearest the GPU (platform/numa_placement.hpp).
// Thread safety: every function may be called from any thread; a kit is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
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
  void* region = nullptr;       // the registered mapping holding every buffer, or null (cuMemHostAlloc)
  std::size_t region_bytes = 0;
  std::uint64_t pinned_bytes = 0;  // counted in kit_pinned_bytes() until destroy_kit
};

/// What a kit of `count` buffers of `buffer_size` pins at most: its buffers on whole huge pages (a kit that
/// ends up with cuMemHostAlloc's pages pins less).
std::uint64_t kit_charge(std::uint64_t buffer_size, unsigned count);

/// A new kit for `device`: a blocking stream, `count` pinned buffers of `buffer_size` bytes and their events.
/// The caller's thread must have the device's context current. Errors: the driver's (pinned memory
/// exhausted, ...), with nothing left held.
Result<std::unique_ptr<StagingKit>> make_kit(const CudaApi& api, int device, std::uint64_t buffer_size,
                                             unsigned count);

/// Frees a kit's driver resources (best effort: used on error paths too).
void destroy_kit(StagingKit& kit);

/// Pinned bytes of every kit that exists now, and the most at once since the process started (or the
/// last reset_peak_pinned_bytes()).
std::uint64_t kit_pinned_bytes();
std::uint64_t peak_kit_pinned_bytes();
void reset_peak_pinned_bytes();

}  // namespace ferry::detail
