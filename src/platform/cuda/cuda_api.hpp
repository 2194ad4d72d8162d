// The CUDA driver API as a table of function pointers, loaded from libcuda at run time.
//
// Not a singleton: the engine is handed a `const CudaApi*` (the process's real one from process_cuda_api(),
// or a fake from tests/support/fake_cuda.hpp), so the staging and GDS logic runs on CPU-only machines.
// Members are named after the exported symbol they hold: `cuMemAlloc_v2` is what cuda.h calls cuMemAlloc.
// Thread safety: a loaded table is immutable; the driver functions themselves are thread-safe.
#pragma once

#include <concepts>
#include <string>
#include <string_view>

#include "ferry/status.hpp"
#include "platform/cuda/cuda_abi.hpp"

namespace ferry::detail {

struct CudaApi {
  // One member per entry point of cuda_symbols.hpp, named after its exported symbol. Optional ones are null
  // when the driver lacks them; complete() does not ask for them.
#define FERRY_CUDA_MEMBER_(need, symbol, result, parameters) symbol##_fn symbol = nullptr;
  FERRY_CUDA_DRIVER_SYMBOLS(FERRY_CUDA_MEMBER_)
#undef FERRY_CUDA_MEMBER_

  std::string library;  // what was opened ("libcuda.so.1"), or a fake's name

  /// Opens `library` and resolves every symbol above (optional ones where present). Does not call cuInit.
  /// Errors: unavailable, with "libcuda.so.1 not found: <dlerror>" or "libcuda.so.1 has no symbol
  /// cuMemAlloc_v2: <dlerror>" (the first required symbol missing, in the list's order).
  [[nodiscard]] static Result<CudaApi> load(const char* library = "libcuda.so.1");

  /// True when every required member is set (a fake may leave some out on purpose).
  bool complete() const noexcept;
  /// OK when stream-ordered requests can be taken at all (cuStreamGetCtx); otherwise unavailable.
  Status stream_ordering_status() const;
  /// OK when the stream memory operations are there (cuStreamWaitValue32_v2, cuStreamWriteValue32_v2,
  /// cuMemHostGetDevicePointer_v2); otherwise unavailable naming the first one missing, and stream-ordered
  /// requests synchronise the stream instead (docs/stream-order.md).
  Status stream_memory_ops_status() const;
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
/// The same, with the description made only on failure: calls on a request's path must not format
/// (or allocate) a message for each success.
template <std::invocable Describe>
Status cuda_check(const CudaApi& api, CUresult result, Describe&& describe) {
  if (result == CUDA_SUCCESS) return Status();
  return cuda_check(api, result, std::string_view(describe()));
}

}  // namespace ferry::detail
