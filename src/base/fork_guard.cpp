// hold_across_fork: one pthread_atfork registration for every lock it is given.
#include "base/fork_guard.hpp"

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdlib>

namespace ferry::detail {
namespace {

constexpr std::size_t kMaxLocks = 8;
std::array<std::mutex*, kMaxLocks> g_locks{};
std::atomic<std::size_t> g_count{0};

void lock_all() {
  for (std::size_t i = 0; i < g_count.load(); ++i) g_locks[i]->lock();
}

void unlock_all() {
  for (std::size_t i = g_count.load(); i-- > 0;) g_locks[i]->unlock();
}

std::atomic<std::uint64_t> g_generation{0};

void enter_child_generation() { g_generation.fetch_add(1, std::memory_order_relaxed); }

// Registered when the library is loaded, before anything could fork.
const int g_generation_registered = pthread_atfork(nullptr, nullptr, enter_child_generation);

}  // namespace

std::uint64_t fork_generation() { return g_generation.load(std::memory_order_relaxed); }

void hold_across_fork(std::mutex& mutex) {
  static const int registered = pthread_atfork(lock_all, unlock_all, unlock_all);
  (void)registered;
  const std::size_t at = g_count.load();
  if (at == kMaxLocks) std::abort();  // a new caller: raise kMaxLocks
  g_locks[at] = &mutex;
  g_count.store(at + 1);
}

}  // namespace ferry::detail
