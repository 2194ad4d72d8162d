// The staged route: Ferry's own CPU-staged path between a file and GPU memory.
//
// Reads: each worker reads a piece of the file into one of its pinned bounce buffers (O_DIRECT for cold
// data, the page cache for hot data, per task) and queues an asynchronous copy to the device on its own
// stream; while that copy runs, the worker reads the next piece into its other buffer. A buffer is reused
// only after the event recorded behind its last copy has completed. finish() waits for every copy, so a
// request completes only once its bytes are on the device.
// Writes: each piece is copied device-to-host into a bounce buffer, then written to the file.
#pragma once

#include <memory>

#include "io/request.hpp"
#include "io/source.hpp"
#include "platform/cuda/cuda_api.hpp"

namespace ferry::detail {

struct StagedTarget {
  const CudaApi* api = nullptr;
  int device = -1;
  CUdeviceptr base = 0;  // the caller's device buffer; task buffer offsets index into it
  std::uint64_t bounce_buffer_size = 0;
  unsigned buffers_per_worker = 2;
};

std::shared_ptr<RouteBackend> make_staged_backend(std::shared_ptr<Source> source, const SourceRequest& request,
                                                  const StagedTarget& target, Decision decision);

}  // namespace ferry::detail
