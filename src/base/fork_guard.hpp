// Process-wide locks that a fork() must not copy while another thread holds them: the child has only the
// forking thread, so a lock copied held would stay held there for good (a data loader's worker process,
// forked after the parent read through Ferry, would hang at its first read).
// Thread safety: hold_across_fork is called during static initialisation, before any fork.
#pragma once

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

}  // namespace ferry::detail
