// The NVTX v3 injection protocol, minimally: see nvtx.hpp.
#include "platform/nvtx/nvtx.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "base/fork_guard.hpp"

namespace ferry::detail::nvtx {
namespace {

// nvtxTypes.h: module ids and how many callback ids each has (its NVTX_CBID_<module>_SIZE).
enum Module : int { kCore = 1, kCuda = 2, kOpenCl = 3, kCudaRt = 4, kCore2 = 5, kSync = 6, kModuleEnd = 7 };
constexpr unsigned kModuleSize[kModuleEnd] = {0, 16, 9, 15, 7, 16, 7};
constexpr unsigned kMaxModuleSize = 16;
// Callback ids of the core module that Ferry calls.
constexpr unsigned kRangeStartA = 5, kRangeEnd = 7, kRangePushA = 9, kRangePop = 11;
constexpr std::uint32_t kNvtxVersion = 3;
constexpr std::uint32_t kExportTableCallbacks = 1, kExportTableVersionInfo = 3;

using FunctionPointer = void (*)();
using FunctionTable = FunctionPointer**;

struct ExportTableCallbacks {
  std::size_t struct_size;
  int (*get_module_function_table)(int module, FunctionTable* out_table, unsigned* out_size);
};
struct ExportTableVersionInfo {
  std::size_t struct_size;
  std::uint32_t version;
  std::uint32_t reserved0;
  void (*set_injection_nvtx_version)(std::uint32_t version);
};
using GetExportTable = const void* (*)(std::uint32_t id);
using InitializeInjection = int (*)(GetExportTable get_export_table);

// The slots a tool fills, and per module the table of pointers to them: entry 0 (the invalid id) and the
// entry after the last id are null, as in nvtxImpl.h.
FunctionPointer g_slots[kModuleEnd][kMaxModuleSize] = {};
FunctionPointer* g_tables[kModuleEnd][kMaxModuleSize + 1] = {};

int get_module_function_table(int module, FunctionTable* out_table, unsigned* out_size) {
  if (module <= 0 || module >= kModuleEnd) return 0;
  if (out_table) *out_table = g_tables[module];
  if (out_size) *out_size = kModuleSize[module] - 1;  // ids 1 .. size-1
  return 1;
}

void set_injection_version(std::uint32_t) {}

const ExportTableCallbacks kCallbacks{sizeof(ExportTableCallbacks), &get_module_function_table};
const ExportTableVersionInfo kVersionInfo{sizeof(ExportTableVersionInfo), kNvtxVersion, 0, &set_injection_version};

const void* get_export_table(std::uint32_t id) {
  if (id == kExportTableCallbacks) return &kCallbacks;
  if (id == kExportTableVersionInfo) return &kVersionInfo;
  return nullptr;
}

struct Tool {
  std::mutex mutex;
  bool looked = false;
  std::atomic<bool> attached{false};
  std::string status;
  const char* forced = nullptr;  // reload_for_testing
  bool use_forced = false;
};

Tool& tool() {
  static constinit std::atomic<Tool*> t{nullptr};  // never destroyed: ranges may end on workers during exit
  return made_once(t, [] { return new Tool; });
}

void reset_tables() {
  for (int m = 1; m < kModuleEnd; ++m) {
    for (unsigned i = 0; i < kMaxModuleSize; ++i) g_slots[m][i] = nullptr;
    for (unsigned i = 0; i <= kMaxModuleSize; ++i) g_tables[m][i] = nullptr;
    for (unsigned i = 1; i < kModuleSize[m]; ++i) g_tables[m][i] = &g_slots[m][i];
  }
}

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}

void look_for_tool(Tool& t) {
  reset_tables();
  InitializeInjection init = nullptr;
  std::string where;
  const char* path = t.use_forced ? t.forced : std::getenv("NVTX_INJECTION64_PATH");
  if (path != nullptr && *path != '\0') {
    dlerror();
    void* handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
      t.status = std::string("could not load NVTX_INJECTION64_PATH=") + path + ": " + dl_error();
      return;
    }
    dlerror();
    init = reinterpret_cast<InitializeInjection>(dlsym(handle, "InitializeInjectionNvtx2"));
    if (init == nullptr) {
      t.status = std::string(path) + " has no InitializeInjectionNvtx2: " + dl_error();
      return;
    }
    where = path;
  } else if (!t.use_forced) {
    // A tool loaded into the process beforehand (LD_PRELOAD) exports the pre-inject entry point.
    init = reinterpret_cast<InitializeInjection>(dlsym(RTLD_DEFAULT, "InitializeInjectionNvtx2Preinject"));
    if (init == nullptr) {
      t.status = "no tool: NVTX_INJECTION64_PATH is not set and no tool is pre-injected";
      return;
    }
    where = "pre-injected tool";
  } else {
    t.status = "no tool (testing)";
    return;
  }
  if (init(&get_export_table) == 0) {
    reset_tables();
    t.status = where + ": InitializeInjectionNvtx2 returned 0";
    return;
  }
  bool ranges = g_slots[kCore][kRangeStartA] && g_slots[kCore][kRangeEnd] && g_slots[kCore][kRangePushA] &&
                g_slots[kCore][kRangePop];
  t.status = ranges ? "attached: " + where : where + ": the tool implements no ranges";
  t.attached.store(ranges, std::memory_order_release);
}

}  // namespace

bool attached() {
  Tool& t = tool();
  if (t.attached.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(t.mutex);
  if (!t.looked) {
    t.looked = true;
    look_for_tool(t);
  }
  return t.attached.load(std::memory_order_relaxed);
}

std::string status() {
  (void)attached();
  Tool& t = tool();
  std::lock_guard<std::mutex> lock(t.mutex);
  return t.status;
}

std::uint64_t range_start(const char* message) {
  if (!attached()) return 0;
  return reinterpret_cast<std::uint64_t (*)(const char*)>(g_slots[kCore][kRangeStartA])(message);
}

void range_end(std::uint64_t id) {
  if (id == 0 || !attached()) return;
  reinterpret_cast<void (*)(std::uint64_t)>(g_slots[kCore][kRangeEnd])(id);
}

void push(const char* message) {
  if (attached()) (void)reinterpret_cast<int (*)(const char*)>(g_slots[kCore][kRangePushA])(message);
}

void pop() {
  if (attached()) (void)reinterpret_cast<int (*)()>(g_slots[kCore][kRangePop])();
}

void reload_for_testing(const char* library) {
  Tool& t = tool();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.attached.store(false, std::memory_order_release);
  t.looked = false;
  t.forced = library;
  t.use_forced = library != nullptr;
}

}  // namespace ferry::detail::nvtx
