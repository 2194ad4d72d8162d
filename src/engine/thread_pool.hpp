// The process-wide worker pool that runs the tasks of every request.
//
// Workers never block waiting for other tasks: a request's jobs pull tasks until none are left, and a
// wait issued on a worker thread (a nested read inside a completion callback) runs queued jobs while it
// waits (help_one), so nested requests cannot deadlock the pool however small it is.
// Thread safety: all members may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry::detail {

class ThreadPool {
 public:
  ThreadPool() = default;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Grows the pool to at least `n` workers (it never shrinks while the process runs).
  void ensure_workers(std::size_t n);
  std::size_t workers() const;
  /// Queues `job`. When more jobs wait than workers are idle, one more worker starts, up to `grow_to`
  /// in all: requests in flight together spread over the workers, however few tasks each one has.
  void submit(std::function<void()> job, std::size_t grow_to = 0);
  /// Runs one queued job on the calling thread. Returns false when the queue was empty.
  bool help_one();
  /// Jobs waiting for a worker now (a hint: it may change at once).
  std::size_t queued() const { return queued_.load(std::memory_order_relaxed); }
  /// True on a thread owned by any ThreadPool.
  static bool on_worker_thread();

 private:
  void worker_loop();
  void add_workers_locked(std::size_t n);  // mutex_ held
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::atomic<std::size_t> queued_{0};  // queue_.size(), readable without the lock
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;  // workers waiting for a job (guarded by mutex_)
  bool stopping_ = false;
};

/// The pool all Files share.
ThreadPool& shared_pool();
/// The pool of stream-ordered requests' steps (stream_pipeline.hpp). Its threads run nothing that could
/// wait for a GPU stream (no copies, no user callbacks), so a stream waiting for one of its steps always
/// gets it done, even while every thread of shared_pool() waits for copies queued behind that stream.
ThreadPool& stream_pool();

}  // namespace ferry::detail
