// One request in flight: a count of ops still to retire, the first error, the outcome and the callbacks behind
// a Future (docs/engine.md). Its ops are on an OpQueue (engine/queue.hpp).
// Thread safety: every public member may be called from any thread at once (counters are atomics; the
// outcome and the callbacks are guarded by mutex_). Callbacks never run under that lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "backends/route_backend.hpp"
#include "engine/queue.hpp"
#include "base/decision.hpp"
#include "base/task.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

/// What a read expects of the file: tasks cover the file as it was when the request began, so a task
/// that comes back short means the file shrank under the read (an error: other tasks may already have
/// written past that point), unless its size cannot be known (/proc, character devices).
struct EndOfFileRule {
  bool short_task_ends_request = false;  // size unknown: a short task is the end of the data
  const std::string* path = nullptr;  // the File's, which outlives the request's ops (they hold a use of it)
  std::uint64_t size_at_start = 0;

  /// The error for task `t` that moved only `bytes`: the file shrank while it was read.
  Status shrank(const Task& t, std::uint64_t bytes) const;
};

/// The work behind a deferred request (a stream-ordered request's steps): see RequestState::deferred().
class DeferredWork {
 public:
  virtual ~DeferredWork() = default;
  virtual void cancel() = 0;
  virtual std::uint64_t bytes_done() const = 0;
};

class RequestState {
 public:
  using Callback = std::function<void(const Result<Transfer>&)>;
  using OnComplete = std::function<void(Report& report, const Status& status, std::uint64_t bytes)>;

  /// Queues `tasks` as ops on `queue` (null: a queue of its own, drained by at most `threads` workers) for
  /// `backend` to run. A short op fails the request as `eof` says; the byte count is the sum of what the ops
  /// moved. `on_complete` gets (and may annotate) the report at completion, failed or not, with the request's
  /// status and bytes moved, before the future is done and callbacks run. `stop`, when given, is set once the request is cancelled or an op failed.
  static std::shared_ptr<RequestState> start(std::span<const Task> tasks, std::shared_ptr<RouteBackend> backend,
                                             std::shared_ptr<OpQueue> queue, unsigned threads, EndOfFileRule eof,
                                             OnComplete on_complete, bool trace_tasks = false,
                                             std::shared_ptr<std::atomic<bool>> stop = nullptr);
  /// A request done before any I/O: `result`, or the error it failed with.
  static std::shared_ptr<RequestState> ready(Result<Transfer> result);
  /// A request whose work is done elsewhere. It is done when the work calls complete_deferred(). While `work`
  /// lives and the request is not done, cancel() calls its cancel() (outside any lock) instead of ending the
  /// request (the work completes it once it has stopped), and bytes_done() is its bytes_done().
  static std::shared_ptr<RequestState> deferred(std::weak_ptr<DeferredWork> work);
  /// Ends a deferred (or ready) request, once. Its callbacks run on a worker of the shared pool, never on the
  /// calling thread.
  void complete_deferred(Result<Transfer> result);

  /// True once cancel() was called or an op failed.
  bool stop_requested() const { return failed_.load(std::memory_order_acquire); }
  bool done() const;
  /// As done(), but leaves a one-op request's grace period alone (a look that is not its caller's).
  bool completed() const { return done_.load(std::memory_order_acquire); }
  /// Stops the request: no op starts after this, ops already running finish, and the request fails with
  /// `cancelled` (unless it had completed or failed already).
  void cancel();
  std::uint64_t bytes_done() const;
  void wait() const;
  bool wait_for(std::chrono::milliseconds timeout) const;
  Result<Transfer> take_result();
  /// Runs `callback` once done: at once if it is, else on the thread that completes the request's last op (a
  /// worker of the shared pool, or a waiter that ran it).
  void then(Callback callback);
  /// How many ops it has, and how many of them are still to retire (a hint while workers retire them).
  std::size_t ops() const { return ops_; }
  std::size_t ops_left() const { return ops_left_.load(std::memory_order_acquire); }
  /// Whether the whole request was asked to be traced (Config::nvtx): its ops get NVTX ranges.
  bool traced() const { return trace_tasks_; }
  /// Where its queue keeps its push until a drainer moves the ops into the queue (OpQueue::push).
  OpQueue::PushNode& push_node() { return push_node_; }

  // For the queue's workers (engine/queue.cpp):
  /// Whether a worker may run this op: always for a request of several ops; for one of one op, only if its
  /// waiter has not taken it (and then nobody else may).
  bool claim();
  /// Retires `n` ops of this request that were not run (it was stopped).
  void drop(std::size_t n);
  /// Retires `ops` of this request that moved `results` (counted in `report`, `ns_each` nanoseconds each;
  /// `gathered`: run together with other requests' ops). The last op's retirement completes the request,
  /// its callbacks running on a worker of the shared pool, or here (`callbacks_here`: a waiter that ran it).
  void retire(std::span<const Op> ops, std::span<Result<std::uint64_t>> results, Report& report,
              std::uint64_t ns_each, bool gathered, bool callbacks_here = false);

 private:
  // A waiting caller runs a one-op request itself if no worker has taken it.
  void run_here_if_unclaimed() const;
  // Makes `s` the outcome unless the request is done or has failed already, and stops its ops. True if it did.
  bool fail(Status s);
  // Runs the request's end (the backend's finish_request, File accounting), then publish().
  void complete(bool callbacks_here);
  // Marks the request done with `status` (outcome_ is in place), wakes the waiters and runs the callbacks:
  // here, or (`callbacks_here` false) on a worker of the shared pool.
  void publish(Status status, bool callbacks_here);
  // A caller that polls or waits with a timeout is not about to run the request itself: its one op's grace
  // period ends (once).
  void expedite() const;
  // On a worker thread: runs queued jobs until the request is done (true) or `deadline` passed (false).
  bool help_until(std::optional<std::chrono::steady_clock::time_point> deadline) const;

  EndOfFileRule eof_;
  std::shared_ptr<RouteBackend> backend_;
  std::shared_ptr<OpQueue> queue_;
  OpQueue::PushNode push_node_;
  OnComplete on_complete_;
  std::size_t ops_ = 0;               // how many ops it has
  std::atomic<std::size_t> ops_left_{0};
  std::atomic<bool> claimed_{false};  // a one-op request's op was taken (by a worker or its waiter)
  std::atomic<std::uint64_t> pool_ticket_{0};  // the worker started with a grace period for its op
  mutable std::atomic<bool> expedited_{false};
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> bytes_done_{0};
  bool trace_tasks_ = false;  // NVTX ranges around its ops (Config::nvtx)
  std::shared_ptr<std::atomic<bool>> stop_;  // told when failed_ is set, for sources mid-op

  mutable std::mutex mutex_;
  mutable std::condition_variable done_cv_;
  std::atomic<bool> done_{false};  // set once, under mutex_ (waiters wait on done_cv_)
  Status first_error_;  // once done_: the request's outcome, OK or the error it ends with
  // The ops' operations as they retire, and once done_ (first_error_ OK) what get() returns. One Transfer
  // rather than a Report and a Result: a small request's state then fits glibc's per-thread cache (1 KiB).
  Transfer outcome_;
  Result<Transfer> outcome() const;  // a copy of the outcome (for callbacks), once done_
  std::vector<Callback> callbacks_;
  std::shared_ptr<RequestState> self_;  // keeps the state alive while ops are queued
  std::weak_ptr<DeferredWork> work_;     // a deferred request's (set before it is shared)
};

}  // namespace ferry::detail
