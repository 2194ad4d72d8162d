// ferry::warm_up: a first read's one-time work, done before the read.
#include "file/warm_up.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "backends/staging_pool.hpp"
#include "engine/thread_pool.hpp"
#include "ferry/file.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry {
namespace detail {

Status warm_up(const CudaApi& api, int device, const Config& config) {
  ScopedDeviceContext context(api, device);  // the caller's thread: leave its context as it was
  FERRY_RETURN_IF_ERROR(context.status());
  const unsigned threads = std::max(1u, config.threads());
  shared_pool().ensure_workers(threads);
  return process_staging_pool().reserve({&api, device, config.bounce_buffer_size()},
                                        config.bounce_buffers_per_thread(), threads);
}

}  // namespace detail

Status warm_up(int device, const Config& config) {
  const detail::CudaApi* api = detail::process_cuda_api();
  if (api == nullptr) {
    return Status(ErrorCode::unavailable,
                  fmt::format("cannot warm up GPU {}: {}", device, detail::process_cuda_status().message()));
  }
  return detail::warm_up(*api, device, config);
}

}  // namespace ferry
