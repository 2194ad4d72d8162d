// Kernels for GPU tests, without nvcc: two small PTX kernels, JIT-compiled by the driver on first use, and
// the few driver entry points the tests need beyond Ferry's own table (modules, launches, device-to-device
// copies, graph capture). Loading the module synchronises the context, as frameworks' lazy module loading
// does: the stream-ordered tests load it while a request is pending on purpose.
// Thread safety: one GpuKernels per thread.
#pragma once

#include <cstdint>
#include <string>

#include "platform/cuda/cuda_abi.hpp"

namespace ferry::testing {

class GpuKernels {
 public:
  /// Opens libcuda.so.1 and resolves the entry points; ok() says whether that worked (why() if not).
  GpuKernels();
  ~GpuKernels();
  GpuKernels(const GpuKernels&) = delete;
  GpuKernels& operator=(const GpuKernels&) = delete;

  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }

  /// Loads the PTX module into the current context (the first call does; later ones are free).
  detail::CUresult load();
  /// Queues `*mismatches += the count of i < n with a[i] != b[i]` on `stream`.
  detail::CUresult count_mismatches(detail::CUdeviceptr a, detail::CUdeviceptr b, std::uint64_t n,
                                    detail::CUdeviceptr mismatches, detail::CUstream stream);
  /// Queues `p[i] = value` for every i < n on `stream`.
  detail::CUresult fill(detail::CUdeviceptr p, std::uint64_t n, std::uint8_t value, detail::CUstream stream);
  /// cuMemcpyDtoDAsync.
  detail::CUresult copy(detail::CUdeviceptr dst, detail::CUdeviceptr src, std::uint64_t n, detail::CUstream stream);
  /// cuStreamBeginCapture (global mode) and cuStreamEndCapture, destroying the graph captured.
  detail::CUresult begin_capture(detail::CUstream stream);
  detail::CUresult end_capture(detail::CUstream stream);

 private:
  detail::CUresult launch(void* function, std::uint64_t n, void** params, detail::CUstream stream);

  void* library_ = nullptr;
  std::string why_;
  void* module_ = nullptr;
  void* count_fn_ = nullptr;
  void* fill_fn_ = nullptr;
  detail::CUresult (*module_load_data_)(void** module, const void* image) = nullptr;
  detail::CUresult (*module_get_function_)(void** function, void* module, const char* name) = nullptr;
  detail::CUresult (*module_unload_)(void* module) = nullptr;
  detail::CUresult (*launch_kernel_)(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned shared, detail::CUstream stream, void** params,
                                     void** extra) = nullptr;
  detail::CUresult (*memcpy_dtod_async_)(detail::CUdeviceptr dst, detail::CUdeviceptr src, std::size_t n,
                                         detail::CUstream stream) = nullptr;
  detail::CUresult (*begin_capture_)(detail::CUstream stream, int mode) = nullptr;
  detail::CUresult (*end_capture_)(detail::CUstream stream, void** graph) = nullptr;
  detail::CUresult (*graph_destroy_)(void* graph) = nullptr;
};

}  // namespace ferry::testing
