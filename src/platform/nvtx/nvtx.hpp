// NVTX ranges for Nsight Systems, without linking NVTX or needing the CUDA toolkit to build.
//
// NVTX v3 is header-only: a program's NVTX calls go through a table of function pointers that a tool
// fills in. When Nsight Systems profiles a process it sets NVTX_INJECTION64_PATH to its injection
// library; the first NVTX call dlopen()s it and calls its InitializeInjectionNvtx2(get_export_table),
// through which the tool asks for the program's per-module tables (NvtxCallbackModule) and writes its
// own functions into them. Ferry does the same, minimally, in nvtx.cpp: its own tables (layouts and
// numbers from nvtx3/nvtxDetail/nvtxTypes.h, checked against the header in tests/unit/nvtx_test.cpp
// where it is installed), loaded once, on the first range of a request whose config has nvtx on.
// Without a tool attached (no NVTX_INJECTION64_PATH, no pre-injected library) ranges cost one branch.
// Thread safety: all functions may be called from any thread.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::detail::nvtx {

/// Loads the tool on the first call (later calls return the same answer): true when a tool took the
/// tables and implements ranges.
bool attached();
/// What happened when looking for the tool: "no tool: NVTX_INJECTION64_PATH is not set", "libX.so:
/// InitializeInjectionNvtx2 returned 0", "attached: /path/libToolsInjection64.so".
std::string status();

/// A range that may start and end on different threads (nvtxRangeStartA / nvtxRangeEnd): requests.
/// 0 when no tool is attached; range_end(0) does nothing.
std::uint64_t range_start(const char* message);
void range_end(std::uint64_t id);
/// A range of the calling thread (nvtxRangePushA / nvtxRangePop): tasks.
void push(const char* message);
void pop();

/// Tests only: forgets the tool and loads `library` as if NVTX_INJECTION64_PATH named it (nullptr: look
/// at the environment again on the next call).
void reload_for_testing(const char* library);

}  // namespace ferry::detail::nvtx
