// An NVTX tool library that writes a timeline instead of a profile: for machines without Nsight Systems.
// Load it the way Nsight does (NVTX_INJECTION64_PATH=libferry_nvtx_timeline.so, with FERRY_NVTX=1); every
// range Ferry starts, ends, pushes and pops is kept in memory with its steady-clock time and thread, and
// written at exit to $FERRY_TIMELINE_OUT (default: ferry-timeline.txt), one event per line:
//     <ns> <thread> start <id> <message> | <ns> <thread> end <id> | <ns> <thread> push <message> | ... pop
// lab/timeline_summary.py turns it into a per-request breakdown.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "nvtx_tool/nvtx_tool_side.hpp"

namespace {

struct Event {
  std::int64_t ns;
  unsigned thread;
  const char* kind;
  std::uint64_t id;
  std::string message;
};

class Timeline {
 public:

  void add(const char* kind, std::uint64_t id, const char* message) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch()).count();
    thread_local const unsigned thread = next_thread_++;
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(Event{ns, thread, kind, id, message ? message : ""});
  }

  std::uint64_t next_id() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ++last_id_;
  }

  void write() {
    const char* path = std::getenv("FERRY_TIMELINE_OUT");
    std::FILE* out = std::fopen(path ? path : "ferry-timeline.txt", "w");
    if (!out) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Event& e : events_) {
      std::fprintf(out, "%lld %u %s %llu %s\n", static_cast<long long>(e.ns), e.thread, e.kind,
                   static_cast<unsigned long long>(e.id), e.message.c_str());
    }
    std::fclose(out);
  }

 private:
  std::mutex mutex_;
  std::vector<Event> events_;
  std::uint64_t last_id_ = 0;
  static inline std::atomic<unsigned> next_thread_{0};
};

// Never destroyed: pool threads may still end a range while the process exits.
Timeline& timeline() {
  static Timeline* t = new Timeline;
  return *t;
}

std::uint64_t range_start(const char* message) {
  std::uint64_t id = timeline().next_id();
  timeline().add("start", id, message);
  return id;
}
void range_end(std::uint64_t id) { timeline().add("end", id, nullptr); }
int push(const char* message) {
  timeline().add("push", 0, message);
  return 0;
}
int pop() {
  timeline().add("pop", 0, nullptr);
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    ferry::nvtx_tool::GetExportTable get_export_table) {
  if (!ferry::nvtx_tool::take_core_ranges(get_export_table, {&range_start, &range_end, &push, &pop})) return 0;
  std::atexit([] { timeline().write(); });
  return 1;
}
