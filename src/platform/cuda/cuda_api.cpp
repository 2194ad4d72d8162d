#include "platform/cuda/cuda_api.hpp"

#include "base/fork_guard.hpp"
#include "base/setup_ledger.hpp"

#include <pthread.h>

#include <mutex>

#include "platform/dynamic_library.hpp"

namespace ferry::detail {

Result<CudaApi> CudaApi::load(const char* library) {
  FERRY_ASSIGN_OR_RETURN(void* handle, open_dynamic_library(library));
  CudaApi api;
  api.library = library;
  // Required symbols stop the loading when missing, optional ones stay null.
#define FERRY_LOAD_CUDA_(need, symbol, result, parameters) \
  FERRY_RETURN_IF_ERROR(load_listed_symbol(handle, library, #symbol, SymbolNeed::need, api.symbol));
  FERRY_CUDA_DRIVER_SYMBOLS(FERRY_LOAD_CUDA_)
#undef FERRY_LOAD_CUDA_
  return api;
}

bool CudaApi::complete() const noexcept {
  bool all_required = true;
#define FERRY_CHECK_CUDA_(need, symbol, result, parameters) \
  all_required = all_required && (SymbolNeed::need != SymbolNeed::required || symbol != nullptr);
  FERRY_CUDA_DRIVER_SYMBOLS(FERRY_CHECK_CUDA_)
#undef FERRY_CHECK_CUDA_
  return all_required;
}

Status CudaApi::stream_ordering_status() const {
  if (cuStreamGetCtx != nullptr) return Status();
  return Status(ErrorCode::unavailable,
                "stream-ordered requests need cuStreamGetCtx, which " + library + " does not export");
}

Status CudaApi::stream_memory_ops_status() const {
  const char* missing = cuStreamWaitValue32_v2 == nullptr         ? "cuStreamWaitValue32_v2"
                        : cuStreamWriteValue32_v2 == nullptr      ? "cuStreamWriteValue32_v2"
                        : cuMemHostGetDevicePointer_v2 == nullptr ? "cuMemHostGetDevicePointer_v2"
                                                                  : nullptr;
  if (missing == nullptr) return Status();
  return Status(ErrorCode::unavailable, std::string(library) + " does not export " + missing);
}

namespace {

struct ProcessCuda {
  CudaApi api;
  Status status;
  bool usable = false;
};

// Never destroyed: worker threads may still use the table while statics are torn down at exit.
ProcessCuda& process_cuda_state() {
  static constinit std::atomic<ProcessCuda*> state{nullptr};
  return made_once(state, [] { return new ProcessCuda; });
}

// CUDA does not survive fork(): in a child of a process that started it, every driver call fails with
// CUDA_ERROR_NOT_INITIALIZED (a PyTorch DataLoader's forked worker, reading into a CPU tensor, failed in
// cuPointerGetAttributes on the GPU machine). The child goes on without it: any buffer it holds is host memory.
void forget_cuda_in_forked_child() {
  ProcessCuda& state = process_cuda_state();
  if (!state.usable) return;
  state.usable = false;
  state.status = Status(ErrorCode::unavailable,
                        "CUDA was started in the process this one was forked from, and CUDA cannot be used "
                        "after fork(): this process reads and writes host memory only (start it with the "
                        "'spawn' method, not 'fork', to use the GPU in it)");
}

const ProcessCuda& process_cuda() {
  static std::once_flag once;
  ProcessCuda& state = process_cuda_state();
  std::call_once(once, [&state] {
    SetupTimer timer(SetupStep::cuda_init);
    Result<CudaApi> loaded = CudaApi::load();
    if (!loaded.ok()) {
      state.status = loaded.status();
      return;
    }
    state.api = std::move(loaded).value();
    CUresult result = state.api.cuInit(0);
    if (result != CUDA_SUCCESS) {
      state.status = Status(ErrorCode::unavailable, "cuInit failed: " + cuda_error_text(state.api, result));
      return;
    }
    state.usable = true;
    ::pthread_atfork(nullptr, nullptr, forget_cuda_in_forked_child);
  });
  return state;
}

}  // namespace

const CudaApi* process_cuda_api() {
  const ProcessCuda& cuda = process_cuda();
  return cuda.usable ? &cuda.api : nullptr;
}

Status process_cuda_status() { return process_cuda().status; }

std::string cuda_error_text(const CudaApi& api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  // Both lookups work before cuInit and fail only for values the driver does not know.
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return "CUDA error " + std::to_string(static_cast<int>(result));
  }
  std::string out = name;
  if (api.cuGetErrorString != nullptr && api.cuGetErrorString(result, &text) == CUDA_SUCCESS && text != nullptr) {
    out += " (";
    out += text;
    out += ")";
  }
  return out;
}

Status cuda_check(const CudaApi& api, CUresult result, std::string_view what) {
  if (result == CUDA_SUCCESS) return Status();
  ErrorCode code = ErrorCode::io_error;
  switch (result) {
    case CUDA_ERROR_INVALID_VALUE:
      code = ErrorCode::invalid_argument;
      break;
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_CONTEXT:
      code = ErrorCode::internal;
      break;
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_PERMITTED:
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      code = ErrorCode::unavailable;
      break;
    default:
      break;
  }
  return Status(code, std::string(what) + " failed: " + cuda_error_text(api, result));
}

}  // namespace ferry::detail
