// A stand-in for Nsight Systems' NVTX injection library, for tests/unit/nvtx_test.cpp: it takes the core
// module's table through the NVTX v3 export-table protocol (as nvtx3/nvtxDetail/nvtxInit.h describes it)
// and records the ranges Ferry starts, ends, pushes and pops. fake_nvtx_tool_events() hands the record
// out as lines: "start <id> <message>", "end <id>", "push <message>", "pop".
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "nvtx_tool/nvtx_tool_side.hpp"

namespace {

std::mutex g_mutex;
std::string g_events;
std::uint64_t g_next_id = 1;

void record(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events += line;
  g_events += '\n';
}

std::uint64_t range_start(const char* message) {
  std::uint64_t id;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    id = g_next_id++;
  }
  record("start " + std::to_string(id) + " " + message);
  return id;
}
void range_end(std::uint64_t id) { record("end " + std::to_string(id)); }
int push(const char* message) {
  record(std::string("push ") + message);
  return 0;
}
int pop() {
  record("pop");
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    ferry::nvtx_tool::GetExportTable get_export_table) {
  if (!ferry::nvtx_tool::take_core_ranges(get_export_table, {&range_start, &range_end, &push, &pop})) return 0;
  return 1;
}

/// Copies the record (NUL-terminated, cut at `capacity`) and clears it; returns its full length.
extern "C" __attribute__((visibility("default"))) int fake_nvtx_tool_events(char* out, int capacity) {
  std::lock_guard<std::mutex> lock(g_mutex);
  int n = static_cast<int>(g_events.size());
  if (capacity > 0) {
    std::size_t copied = std::min<std::size_t>(g_events.size(), static_cast<std::size_t>(capacity - 1));
    std::memcpy(out, g_events.data(), copied);
    out[copied] = '\0';
  }
  g_events.clear();
  return n;
}
