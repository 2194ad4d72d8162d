// Waiting for a stream's work without holding a core that another thread needs.
// Thread safety: any thread may wait on any stream.
#pragma once

#include "platform/cuda/cuda_api.hpp"

namespace ferry::detail {

/// Returns once everything queued on `stream` has run: CUDA_SUCCESS, or the error the driver reports for
/// the stream's work. It asks the driver (cuStreamQuery) in a tight loop for a few microseconds, long enough
/// for a small copy, and after that gives the core to any other runnable thread between questions.
[[nodiscard]] CUresult wait_for_stream(const CudaApi& api, CUstream stream);
/// The same for the work queued before `event` was recorded (cuEventQuery).
[[nodiscard]] CUresult wait_for_event(const CudaApi& api, CUevent event);

}  // namespace ferry::detail
