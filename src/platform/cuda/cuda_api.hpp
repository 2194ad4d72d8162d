// The CUDA driver API as a table of function pointers, loaded from libcuda at run time.
//
// Not a singleton: the engine is handed a `const CudaApi*` (the process's real one from process_cuda_api(),
// or a fake from tests/support/fake_cuda.hpp), so the staging and GDS logic runs on CPU-only machines.
// Members are named after the exported symbol they hold: `cuMemAlloc_v2` is what cuda.h calls cuMemAlloc.
// Thread safety: a loaded table is immutable; the driver functions themselves are thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "ferry/status.hpp"
#include "platform/cuda/cuda_abi.hpp"

namespace ferry::detail {

struct CudaApi {
  cuInit_fn cuInit = nullptr;
  cuDriverGetVersion_fn cuDriverGetVersion = nullptr;
  cuDeviceGetCount_fn cuDeviceGetCount = nullptr;
  cuDeviceGet_fn cuDeviceGet = nullptr;
  cuDeviceGetName_fn cuDeviceGetName = nullptr;
  cuDeviceGetAttribute_fn cuDeviceGetAttribute = nullptr;
  cuDeviceGetPCIBusId_fn cuDeviceGetPCIBusId = nullptr;
  cuDeviceTotalMem_v2_fn cuDeviceTotalMem_v2 = nullptr;
  cuDevicePrimaryCtxRetain_fn cuDevicePrimaryCtxRetain = nullptr;
  cuDevicePrimaryCtxRelease_v2_fn cuDevicePrimaryCtxRelease_v2 = nullptr;
  cuCtxSetCurrent_fn cuCtxSetCurrent = nullptr;
  cuCtxGetCurrent_fn cuCtxGetCurrent = nullptr;
  cuCtxSynchronize_fn cuCtxSynchronize = nullptr;
  cuPointerGetAttribute_fn cuPointerGetAttribute = nullptr;
  cuPointerGetAttributes_fn cuPointerGetAttributes = nullptr;
  cuMemAlloc_v2_fn cuMemAlloc_v2 = nullptr;
  cuMemFree_v2_fn cuMemFree_v2 = nullptr;
  cuMemHostAlloc_fn cuMemHostAlloc = nullptr;
  cuMemFreeHost_fn cuMemFreeHost = nullptr;
  cuMemHostRegister_v2_fn cuMemHostRegister_v2 = nullptr;
  cuMemHostUnregister_fn cuMemHostUnregister = nullptr;
  cuMemcpyHtoD_v2_fn cuMemcpyHtoD_v2 = nullptr;
  cuMemcpyDtoH_v2_fn cuMemcpyDtoH_v2 = nullptr;
  cuMemcpyHtoDAsync_v2_fn cuMemcpyHtoDAsync_v2 = nullptr;
  cuMemcpyDtoHAsync_v2_fn cuMemcpyDtoHAsync_v2 = nullptr;
  cuMemsetD8_v2_fn cuMemsetD8_v2 = nullptr;
  cuStreamCreate_fn cuStreamCreate = nullptr;
  cuStreamDestroy_v2_fn cuStreamDestroy_v2 = nullptr;
  cuStreamSynchronize_fn cuStreamSynchronize = nullptr;
  cuEventCreate_fn cuEventCreate = nullptr;
  cuEventRecord_fn cuEventRecord = nullptr;
  cuEventSynchronize_fn cuEventSynchronize = nullptr;
  cuEventQuery_fn cuEventQuery = nullptr;
  cuEventDestroy_v2_fn cuEventDestroy_v2 = nullptr;
  cuGetErrorName_fn cuGetErrorName = nullptr;
  cuGetErrorString_fn cuGetErrorString = nullptr;
  cuMemcpyPeerAsync_fn cuMemcpyPeerAsync = nullptr;
  cuDeviceCanAccessPeer_fn cuDeviceCanAccessPeer = nullptr;
  cuCtxEnablePeerAccess_fn cuCtxEnablePeerAccess = nullptr;

  // Optional (resolved when the driver has them; complete() does not ask for them): what stream-ordered
  // requests need (stream_ordering_status()), and an async memset for tests and tools.
  cuLaunchHostFunc_fn cuLaunchHostFunc = nullptr;
  cuStreamWaitValue32_v2_fn cuStreamWaitValue32_v2 = nullptr;
  cuStreamGetCtx_fn cuStreamGetCtx = nullptr;
  cuMemHostGetDevicePointer_v2_fn cuMemHostGetDevicePointer_v2 = nullptr;
  cuMemsetD8Async_fn cuMemsetD8Async = nullptr;

  std::string library;  // what was opened ("libcuda.so.1"), or a fake's name

  /// Opens `library` and resolves every symbol above. Does not call cuInit. Errors: unavailable, with
  /// "libcuda.so.1 not found: <dlerror>" or "libcuda.so.1 has no symbol cuMemAlloc_v2: <dlerror>".
  [[nodiscard]] static Result<CudaApi> load(const char* library = "libcuda.so.1");

  /// True when every member is set (a fake may leave some out on purpose).
  bool complete() const noexcept;
  /// OK when the entry points of stream-ordered requests are there (cuLaunchHostFunc, cuStreamGetCtx;
  /// cuStreamWaitValue32_v2 and cuMemHostGetDevicePointer_v2 are used where present); otherwise
  /// unavailable, naming the missing symbol.
  Status stream_ordering_status() const;
};

/// The process's CUDA driver: loaded and cuInit(0)-ed on first call, then the same table forever.
/// nullptr when CUDA cannot be used here; process_cuda_status() says why. Thread-safe.
const CudaApi* process_cuda_api();
/// OK when process_cuda_api() is not null; otherwise unavailable with the reason: "libcuda.so.1 not found:
/// ...", "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
Status process_cuda_status();

/// "CUDA_ERROR_INVALID_VALUE (invalid argument)", or "CUDA error 12345" when the driver has no name for it.
std::string cuda_error_text(const CudaApi& api, CUresult result);

/// OK for CUDA_SUCCESS; otherwise "<what> failed: CUDA_ERROR_INVALID_VALUE (invalid argument)". Codes:
/// invalid_argument for CUDA_ERROR_INVALID_VALUE (usually a pointer the caller passed); internal for an
/// invalid handle or context (Ferry manages those); unavailable for driver, device and memory exhaustion
/// problems; io_error for everything else (illegal address, ...).
Status cuda_check(const CudaApi& api, CUresult result, std::string_view what);

}  // namespace ferry::detail
