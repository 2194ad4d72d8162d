// The staged route: Ferry's own CPU-staged path between a file and GPU memory. Reads: each worker reads a
// piece of the file into one of its pinned bounce buffers (O_DIRECT for cold data, the page cache for hot
// data, per task) and queues an asynchronous copy to the device on its own stream while it reads the next;
// a buffer is reused only after the event behind its last copy has completed. Writes: each piece is copied
// device-to-host into a bounce buffer, then written to the file. How a worker shares ops among requests,
// packs small ones into one buffer and one copy, and retires them as their copies land: docs/engine.md.
#pragma once

#include <memory>

#include "backends/route_backend.hpp"
#include "base/destination.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "source/source.hpp"

namespace ferry::detail {

/// Requests from this size up start each worker with short pieces that grow to the bounce buffer (the
/// timeline of 256 MiB requests on the H200 showed the copy engine idle until the first reads ended);
/// smaller ones read each task whole, in as few system calls and copies as it takes.
inline constexpr std::uint64_t kRampFromBytes = 64ull << 20;

struct StagedTarget {
  const CudaApi* api = nullptr;
  int device = -1;
  Destination destination;  // the caller's device memory; task buffer offsets index into it (base 0 for a
                            // batch, whose tasks carry their addresses; segments for a scattered read)
  std::uint64_t bounce_buffer_size = 0;
  unsigned buffers_per_worker = 2;
  bool ramp = false;     // first pieces short, then growing (requests of kRampFromBytes and more)
};

/// `shared`: whether the request's ops join those of the file's other staged requests to the same GPU.
std::shared_ptr<RouteBackend> make_staged_backend(Source* source, const SourceRequest& request,
                                                  const StagedTarget& target, Decision decision, bool shared = true);

}  // namespace ferry::detail
