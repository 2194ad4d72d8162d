// Locks of the binding that a forked child makes afresh. A child of fork() has none of its parent's threads, and
// a copy of a lock one of them held at that moment stays held for good: a DataLoader worker's first read through
// a File its parent opened hung in FileRequests::started(), the parent's pool threads having been counting its
// reads' ends at the fork (about 1 fork in 3,000 on the CPU machine; python/tests/test_fork.py). The engine keeps
// such state per process (src/file/file_state.hpp, ProcessPart); the binding's per-File locks renew themselves.
// Thread safety: renew_if_forked() may be called from any thread.
#pragma once

#include <unistd.h>

#include <atomic>
#include <thread>

namespace ferry::python {

/// The process that an object's locks belong to.
class ForkStamp {
 public:
  /// Calls `renew` (which makes the locks anew) once in a process forked since they were made, before any
  /// other thread of that process goes on to use them.
  template <typename Renew>
  void renew_if_forked(Renew&& renew) {
    const pid_t now = ::getpid();
    pid_t seen = pid_.load(std::memory_order_acquire);
    if (seen == now) return;
    // -now: this process's renewal is under way, and a second thread waits for it.
    if (seen != -now && pid_.compare_exchange_strong(seen, -now, std::memory_order_acq_rel)) {
      renew();
      pid_.store(now, std::memory_order_release);
      return;
    }
    while (pid_.load(std::memory_order_acquire) != now) std::this_thread::yield();
  }

 private:
  std::atomic<pid_t> pid_{::getpid()};
};

}  // namespace ferry::python
