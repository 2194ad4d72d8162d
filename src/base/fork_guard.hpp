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

/// This process's part of an object that a forked child must not share with its parent (its locks may have been
/// copied held by threads that do not exist in the child; its connections are the parent's): `slot`'s part where
/// this process made it (`T::generation` is fork_generation() then), else, in a forked child's first use, a new
/// one made by `make(parent's part, generation)`, which may copy what is the object's rather than the process's.
/// The parent's part is left as it was, never locked or destroyed here.
template <typename T, typename Make>
T& this_process_part(std::atomic<T*>& slot, Make make) {
  T* part = slot.load(std::memory_order_acquire);
  const std::uint64_t generation = fork_generation();
  if (part->generation == generation) return *part;
  T* own = make(*part, generation);
  if (slot.compare_exchange_strong(part, own, std::memory_order_acq_rel)) return *own;
  delete own;  // another thread of the child made it first
  return *part;
}

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
