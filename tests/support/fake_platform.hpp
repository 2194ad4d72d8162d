// The GPU platform made of the fake CUDA driver and the fake cuFile (fake_cuda.hpp, fake_cufile.hpp), to
// hand to open_file (OpenOptions::gpu) or the doctor in CPU tests.
#pragma once

#include "platform/gpu_platform.hpp"

namespace ferry::testing {

const detail::GpuPlatform& fake_gpu_platform();
/// The same, with a driver older than CUDA 12.8: no batched copies (cuMemcpyBatchAsync), a copy each.
const detail::GpuPlatform& fake_gpu_platform_without_batched_copies();

}  // namespace ferry::testing
