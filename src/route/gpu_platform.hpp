// Where the router gets CUDA and cuFile from: the process's real libraries, or a test's fakes.
// Both are loaded on first use only, so host-only programs never load cuFile.
#pragma once

#include "ferry/status.hpp"

namespace ferry::detail {

struct CudaApi;
struct CuFileApi;

struct GpuPlatform {
  /// The CUDA driver table, or nullptr with *why set.
  const CudaApi* (*cuda)(Status* why) = nullptr;
  /// The cuFile table, or nullptr with *why set.
  const CuFileApi* (*cufile)(Status* why) = nullptr;
};

/// The real libraries (process_cuda_api, process_cufile_api).
const GpuPlatform& process_gpu_platform();

}  // namespace ferry::detail
