// Process-wide locks that a fork() must not copy while another thread holds them: the child has only the
// forking thread, so a lock copied held would stay held there for good (a data loader's worker process,
// forked after the parent read through Ferry, would hang at its first read).
// Thread safety: hold_across_fork is called during static initialisation, before any fork; made_once from any
// thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace ferry::detail {

/// Holds `mutex` across every fork() of the process: locked in the parent just before, unlocked in both
/// processes just after. Only for leaf locks (nothing else is locked while one is held), which the
/// handlers can then take in any order without deadlocking the parent.
void hold_across_fork(std::mutex& mutex);

/// How many fork()s lie between the process that first loaded Ferry and this one (0 there, 1 in its children,
/// ...): state that belongs to the threads of the process that made it (a File's queue of gathered reads and
/// its drainers) is made anew when it finds itself in a later generation.
std::uint64_t fork_generation();

/// The process-wide object in `slot`, made by `make()` on first use and never destroyed. Not a function-local
/// static: a thread inside a static's first-use guard at fork() leaves the guard held in the child, whose first
/// user then waits for good (Fork.ChildrenForkedWhileTheParentReadsOnOtherThreads). Threads that race may each
/// make one; all but the first are deleted, so `make` must do nothing else.
template <typename T, typename Make>
T& made_once(std::atomic<T*>& slot, Make make) {
  T* seen = slot.load(std::memory_order_acquire);
  if (seen != nullptr) return *seen;
  T* made = make();
  if (slot.compare_exchange_strong(seen, made, std::memory_order_acq_rel)) return *made;
  delete made;
  return *seen;
}

}  // namespace ferry::detail
