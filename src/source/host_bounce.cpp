// HostBounce: a free list of page-aligned mappings, made on first need and kept.
#include "source/host_bounce.hpp"

#include <sys/mman.h>

#include <mutex>
#include <vector>

#include "base/fork_guard.hpp"

namespace ferry::detail {
namespace {

// More idle buffers than this are unmapped when returned: as many as workers read at once, with room.
constexpr std::size_t kMostIdle = 64;

std::mutex g_idle_mutex;  // a leaf lock: guards idle()
const bool g_idle_mutex_forks = (hold_across_fork(g_idle_mutex), true);

std::vector<char*>& idle() {
  // Never destroyed: workers may return buffers during exit.
  static constinit std::atomic<std::vector<char*>*> buffers{nullptr};
  return made_once(buffers, [] { return new std::vector<char*>; });
}

char* make_buffer() {
  void* p = ::mmap(nullptr, kHostBounceBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  (void)::madvise(p, kHostBounceBytes, MADV_HUGEPAGE);  // best effort: fewer pages for the disk to reach
  return static_cast<char*>(p);
}

}  // namespace

HostBounce::HostBounce() : data_(nullptr) {
  {
    std::lock_guard<std::mutex> lock(g_idle_mutex);
    if (!idle().empty()) {
      data_ = idle().back();
      idle().pop_back();
    }
  }
  if (data_ == nullptr) data_ = make_buffer();
}

HostBounce::~HostBounce() {
  if (data_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_idle_mutex);
    if (idle().size() < kMostIdle) {
      idle().push_back(data_);
      return;
    }
  }
  (void)::munmap(data_, kHostBounceBytes);
}

}  // namespace ferry::detail
