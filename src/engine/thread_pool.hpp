// The process-wide worker pool that runs the tasks of every request. A wait issued on a worker thread (a
// nested read inside a completion callback) runs queued jobs while it waits (help_one), so nested requests
// cannot deadlock the pool however small it is.
// Thread safety: all members may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <type_traits>
#include <thread>
#include <vector>

namespace ferry::detail {

/// What a worker runs: a function with the object it works on, which the job keeps alive while it waits. That
/// form allocates nothing, so that no worker frees a block the submitting thread made (docs/engine.md); any
/// other callable is moved into a block of its own, made here, and is its object.
class PoolJob {
 public:
  PoolJob(void (*run)(void*), std::shared_ptr<void> owner) : run_(run), owner_(std::move(owner)) {}
  template <typename F, typename C = std::decay_t<F>, typename = std::enable_if_t<!std::is_same_v<C, PoolJob>>>
  PoolJob(F&& callable)  // NOLINT: implicit, as std::function's
      : PoolJob([](void* c) { (*static_cast<C*>(c))(); }, std::make_shared<C>(std::forward<F>(callable))) {}
  void operator()() { run_(owner_.get()); }

 private:
  void (*run_)(void*);
  std::shared_ptr<void> owner_;
};

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
  /// With a `grace` period, no worker takes the job before it has waited that long (help_one() may): the
  /// submitting thread, about to wait for it, runs it itself without a hand-off (the job must then find
  /// itself taken and do nothing). The watcher sleeps until the first queued job's time, so callers use
  /// one grace period: a job due sooner than those queued before it would wait for theirs.
  /// Returns the job's ticket, for withdraw() and expedite().
  std::uint64_t submit(PoolJob job, std::size_t grow_to = 0,
                       std::chrono::microseconds grace = std::chrono::microseconds(0));
  /// Takes the job of `ticket` off the queue if no thread has begun it (one run by its submitter instead
  /// need not wake a worker later only to find it done). True if it did.
  bool withdraw(std::uint64_t ticket);
  /// Ends the grace period of `ticket`'s job if it is still queued: a worker takes it now.
  void expedite(std::uint64_t ticket);
  /// Runs one queued job (ready or in its grace period) on the calling thread. Returns false when the
  /// queue was empty.
  bool help_one();
  /// The jobs queued in their grace period or past it but not taken (the workers being busy).
  std::size_t queued_with_grace() const;
  /// The jobs submitted so far.
  std::uint64_t submitted() const;
  /// True on a thread owned by any ThreadPool.
  static bool on_worker_thread();

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    PoolJob job;
    Clock::time_point ready_at;  // no worker takes it earlier (min(): at once)
    std::uint64_t ticket = 0;
    std::size_t grow_to = 0;  // the most workers its submitter let the pool grow to
    bool in_grace() const { return ready_at != Clock::time_point::min(); }  // counted in waiting_out_grace_
  };
  void worker_loop();
  void add_workers_locked(std::size_t n);  // mutex_ held
  // Takes `it` off the queue and returns its job, keeping the counts (mutex_ held).
  PoolJob take_locked(std::deque<Entry>::iterator it);
  // The first job a worker may take at `now`, or queue_.end() (mutex_ held).
  std::deque<Entry>::iterator first_ready_locked(Clock::time_point now);
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Entry> queue_;
  std::vector<std::thread> threads_;
  // Guarded by mutex_:
  std::size_t idle_ = 0;        // workers waiting for a job
  bool watching_ = false;       // a worker waits for the first job's grace period to end
  std::size_t waiting_out_grace_ = 0;  // entries submitted with a grace period (ready or not yet)
  std::uint64_t last_ticket_ = 0;
  // How long a watcher stays after the last job with a grace period came.
  static constexpr std::chrono::milliseconds kWatchLinger{2};
  Clock::time_point last_grace_submit_{};
  std::chrono::microseconds last_grace_{0};
  bool stopping_ = false;
};

/// The pool all Files share.
ThreadPool& shared_pool();
/// The pool of stream-ordered requests' steps (file/stream_request.hpp). Its threads run nothing that could
/// wait for a GPU stream (no copies, no user callbacks), so a stream waiting for one of its steps always
/// gets it done, even while every thread of shared_pool() waits for copies queued behind that stream.
ThreadPool& stream_pool();

}  // namespace ferry::detail
