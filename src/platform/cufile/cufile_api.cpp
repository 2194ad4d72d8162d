#include "platform/cufile/cufile_api.hpp"

#include <mutex>

#include "base/fork_guard.hpp"
#include "base/setup_ledger.hpp"

#include "platform/cufile/cufile_log.hpp"
#include "platform/dynamic_library.hpp"

namespace ferry::detail {

namespace {

constexpr const char* kDefaultLibraries[] = {"libcufile.so.0", "libcufile.so", "/usr/local/cuda/lib64/libcufile.so.0"};

Status resolve(void* handle, const char* name, CuFileApi& api) {
#define FERRY_LOAD_CUFILE_(need, symbol, result, parameters) \
  FERRY_RETURN_IF_ERROR(load_listed_symbol(handle, name, #symbol, SymbolNeed::need, api.symbol, &api.missing_optional));
  FERRY_CUFILE_SYMBOLS(FERRY_LOAD_CUFILE_)
#undef FERRY_LOAD_CUFILE_
  return Status();
}

}  // namespace

Result<CuFileApi> CuFileApi::load(const char* library) {
  std::string tried;
  for (const char* name : kDefaultLibraries) {
    if (library != nullptr) name = library;
    Result<void*> handle = open_dynamic_library(name);
    if (handle.ok()) {
      CuFileApi api;
      api.library = name;
      FERRY_RETURN_IF_ERROR(resolve(*handle, name, api));
      return api;
    }
    if (!tried.empty()) tried += "; ";
    tried += handle.status().message();
    if (library != nullptr) break;
  }
  return Status(ErrorCode::unavailable, tried);
}

namespace {

struct ProcessCuFile {
  CuFileApi api;
  Status status;
  bool loaded = false;
};

const ProcessCuFile& process_cufile() {
  static std::once_flag once;
  // Never destroyed: I/O threads may still use the table while statics are torn down at exit.
  static constinit std::atomic<ProcessCuFile*> made{nullptr};
  ProcessCuFile& state = made_once(made, [] { return new ProcessCuFile; });
  std::call_once(once, [&state] {
    // cuFile may read its environment as soon as it is loaded, so the log goes to our file from the start.
    prepare_cufile_log();
    SetupTimer timer(SetupStep::cufile_load);
    Result<CuFileApi> loaded = CuFileApi::load();
    if (!loaded.ok()) {
      state.status = loaded.status();
      return;
    }
    state.api = std::move(loaded).value();
    state.loaded = true;
  });
  return state;
}

}  // namespace

const CuFileApi* process_cufile_api() {
  const ProcessCuFile& cufile = process_cufile();
  return cufile.loaded ? &cufile.api : nullptr;
}

Status process_cufile_status() { return process_cufile().status; }

}  // namespace ferry::detail
