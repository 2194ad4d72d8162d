// The tool's side of NVTX v3's injection protocol (as nvtx3/nvtxDetail/nvtxInit.h describes it), for the
// tool libraries that stand in for Nsight Systems: tests/nvtx_tool/fake_nvtx_tool.cpp and
// lab/nvtx_timeline.cpp. A tool's InitializeInjectionNvtx2 hands its range functions to
// take_core_ranges(), which writes them into the program's core-module table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::nvtx_tool {

using GetExportTable = const void* (*)(std::uint32_t id);

struct CoreRanges {
  std::uint64_t (*range_start)(const char* message);
  void (*range_end)(std::uint64_t id);
  int (*push)(const char* message);
  int (*pop)();
};

/// True when the program offered a core-module table large enough and `ranges` now fill it.
inline bool take_core_ranges(GetExportTable get_export_table, const CoreRanges& ranges) {
  using FunctionPointer = void (*)();
  using FunctionTable = FunctionPointer**;
  struct ExportTableCallbacks {
    std::size_t struct_size;
    int (*get_module_function_table)(int module, FunctionTable* out_table, unsigned* out_size);
  };
  const auto* callbacks = static_cast<const ExportTableCallbacks*>(get_export_table(1));  // NVTX_ETID_CALLBACKS
  if (callbacks == nullptr || callbacks->struct_size < sizeof(ExportTableCallbacks)) return false;
  FunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks->get_module_function_table(1, &table, &size) || size < 11) return false;  // NVTX_CB_MODULE_CORE
  *table[5] = reinterpret_cast<FunctionPointer>(ranges.range_start);  // NVTX_CBID_CORE_RangeStartA
  *table[7] = reinterpret_cast<FunctionPointer>(ranges.range_end);    // NVTX_CBID_CORE_RangeEnd
  *table[9] = reinterpret_cast<FunctionPointer>(ranges.push);         // NVTX_CBID_CORE_RangePushA
  *table[11] = reinterpret_cast<FunctionPointer>(ranges.pop);         // NVTX_CBID_CORE_RangePop
  return true;
}

}  // namespace ferry::nvtx_tool
