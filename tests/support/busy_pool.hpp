// BusyPool: every worker of the shared pool held busy until release() (or the end of the scope), so that a
// test can show what happens when no worker is free: who runs a request then, and that it still ends.
//
//   testing::BusyPool busy;  // returns once every worker runs one of its jobs
//   ... requests that must not need a worker ...
//   busy.release();
//
// release_one() frees one worker at a time: jobs queued while all were busy then run on that one, in order.
#pragma once

#include <cstddef>
#include <latch>
#include <memory>
#include <semaphore>

#include "engine/thread_pool.hpp"

namespace ferry::testing {

class BusyPool {
 public:
  /// `at_least` workers are made busy: a request of that many `threads` or fewer then starts no new one.
  explicit BusyPool(std::size_t at_least = 2) {
    detail::ThreadPool& pool = detail::shared_pool();
    pool.ensure_workers(at_least);
    const auto workers = static_cast<std::ptrdiff_t>(pool.workers());
    auto all_busy = std::make_shared<std::latch>(workers);
    held_ = workers;
    for (std::ptrdiff_t i = 0; i < workers; ++i) {
      pool.submit([release = release_, all_busy] {
        all_busy->count_down();
        release->acquire();
      });
    }
    all_busy->wait();
  }
  BusyPool(const BusyPool&) = delete;
  BusyPool& operator=(const BusyPool&) = delete;
  ~BusyPool() { release(); }

  /// Lets the workers still held go.
  void release() {
    release_->release(held_);
    held_ = 0;
  }
  /// Lets one worker go (if one is still held).
  void release_one() {
    if (held_ == 0) return;
    release_->release();
    --held_;
  }

 private:
  // Shared with the workers' jobs, not on the test's stack: a released worker may still touch it after the
  // test has ended.
  std::shared_ptr<std::counting_semaphore<>> release_ = std::make_shared<std::counting_semaphore<>>(0);
  std::ptrdiff_t held_ = 0;
};

}  // namespace ferry::testing
