// One request in flight: its tasks, the jobs that pull them, and the shared state behind a Future.
//
// A request runs as min(threads, tasks) jobs on the shared pool. Each job owns a RouteWorker (per-thread
// resources such as bounce buffers and a stream) and pulls task indices from an atomic counter until none
// are left or any task failed. The request completes only when every job has stopped, so after a
// failure nothing writes into the caller's buffer any more.
// Thread safety: a RequestState is shared by its jobs, its Futures and whoever completes a deferred one; every
// public member may be called from any thread at once (the task counters are atomics, the result, the
// callbacks and a deferred request's progress are guarded by mutex_). Callbacks never run under that lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "backends/route_backend.hpp"
#include "base/decision.hpp"
#include "base/task.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

/// What a read expects of the file: tasks cover the file as it was when the request began, so a task
/// that comes back short means the file shrank under the read (an error: other tasks may already have
/// written past that point). Only a read of a file whose size cannot be known (/proc, character devices)
/// is one sequential task that may end early.
struct EndOfFileRule {
  bool short_task_ends_request = false;  // size unknown: a short task is the end of the data
  std::string path;                      // for the error otherwise
  std::uint64_t size_at_start = 0;

  /// The error for task `t` that moved only `bytes`: the file shrank while it was read.
  Status shrank(const Task& t, std::uint64_t bytes) const;
};

class RequestState {
 public:
  using Callback = std::function<void(const Result<Transfer>&)>;

  /// Starts `tasks` on the shared pool with at most `threads` jobs. A task that moves fewer bytes than
  /// its length fails the request, unless `eof` says the file's size is unknown; the request's byte
  /// count is the sum of what its tasks moved, so no byte past it was written. `on_complete` gets (and may annotate) the request's report
  /// at completion, failed or not (File accounting), before the future is done and before callbacks
  /// registered by then() run.
  /// `stop`, when given, is set once the request is cancelled or a task failed (SourceRequest::stop).
  /// `next`: whether the submitter may wait for the request next (and run a one-job request itself, so the
  /// workers leave it alone for a moment), or is reading ahead, which hands the job to a worker at once.
  enum class Submitter { may_wait_next, reads_ahead };
  static std::shared_ptr<RequestState> start(std::vector<Task> tasks, std::shared_ptr<RouteBackend> backend,
                                             unsigned threads, EndOfFileRule eof,
                                             std::function<void(Report&)> on_complete, bool trace_tasks = false,
                                             std::shared_ptr<std::atomic<bool>> stop = nullptr,
                                             Submitter next = Submitter::may_wait_next);
  /// A request that failed before any I/O.
  static std::shared_ptr<RequestState> failed(Status status);
  /// A request whose work is done elsewhere (a stream-ordered request's pipeline, a gathered read). It is
  /// done when complete_deferred() is called.
  /// `on_cancel`, when given, is called (once, outside any lock) when cancel() is, instead of ending the
  /// request: the work decides when it has stopped and then calls complete_deferred(). Without it, cancel()
  /// marks the request (stop_requested()) and complete_deferred() ends it `cancelled`.
  static std::shared_ptr<RequestState> deferred(std::function<void()> on_cancel);
  /// Where complete_deferred() runs the callbacks registered by then().
  enum class CallbacksOn {
    pool,  // never on the calling thread (the stream-ordered requests' watcher must not run user code)
    here,  // on the calling thread, a worker of the shared pool, as a request's own jobs do
  };
  /// Ends a deferred request.
  void complete_deferred(Result<Transfer> result, CallbacksOn callbacks = CallbacksOn::pool);
  /// True once cancel() was called or a task failed.
  bool stop_requested() const { return failed_.load(std::memory_order_acquire); }
  /// done() without its side effect (a one-job request's grace period is left alone).
  bool finished() const;
  /// Whether then() left callbacks that have not run yet.
  bool has_callbacks() const;
  /// How a deferred request reports bytes_done() while it runs.
  void set_progress(std::function<std::uint64_t()> progress);

  bool done() const;
  /// Stops the request at the next task boundary: no task starts after this, tasks already running
  /// finish, and the request fails with `cancelled` (unless it had completed or failed already).
  void cancel();
  std::uint64_t bytes_done() const;
  void wait() const;
  bool wait_for(std::chrono::milliseconds timeout) const;
  Result<Transfer> take_result();
  /// `hurry`: a one-job request's grace period ends (nobody will run it on their own thread).
  void then(Callback callback, bool hurry = true);
  /// A waiting caller runs a one-job request itself if no worker has begun it (of at most `max_tasks`
  /// tasks); true if it did.
  bool run_here_if_unclaimed(std::size_t max_tasks = std::numeric_limits<std::size_t>::max()) const;

 private:
  // One job: a worker pulling tasks. It may stop between tasks and go back into the pool's queue behind
  // other work (may_yield), keeping its worker and its operations so far.
  struct Job {
    bool started = false;
    std::unique_ptr<RouteWorker> worker;
    Report local;
    std::vector<Result<std::uint64_t>> results;  // a take's, where a take is several tasks
  };
  enum class Continue { done, later };
  static void run_queued_job(void* state);  // a pool job: runs a job of the RequestState if one is unclaimed
  bool claim_job();  // takes one of the jobs not begun yet, from the pool or a waiter
  // A pool worker's job: it may go back into the pool's queue (hence shared), behind other work.
  void run_job(std::shared_ptr<Job> job);
  // The job's worker made (or resumed) and its tasks run, until none are left or (may_yield) it yields.
  Continue work_on(Job& job, bool may_yield);
  // The worker's finish, its report, and the request's completion after its last job (its callbacks run
  // `callbacks`).
  void end_job(Job& job, CallbacksOn callbacks);
  void end_parked_job(Job& job);  // end_job of a job parked on a worker thread (ThreadPool::park)
  Continue run_tasks(Job& job, bool may_yield);  // until none are left, one failed, or it yields
  void record_error(Status s);
  void complete(CallbacksOn callbacks);

  std::vector<Task> tasks_;
  EndOfFileRule eof_;
  std::shared_ptr<RouteBackend> backend_;
  std::function<void(Report&)> on_complete_;
  std::atomic<std::size_t> next_task_{0};
  unsigned jobs_ = 0;  // how many it started with
  std::atomic<unsigned> active_jobs_{0};
  std::atomic<unsigned> unclaimed_jobs_{0};  // jobs no thread has begun
  bool single_job_ = false;
  std::uint64_t pool_ticket_ = 0;  // the job of a request with a grace period (set before start() returns)
  mutable std::atomic<bool> expedited_{false};
  // A caller that polls, waits with a timeout or leaves a callback is not about to run the request itself:
  // its one job's grace period ends (once).
  void expedite() const;
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> bytes_done_{0};
  bool trace_tasks_ = false;  // an NVTX range around each task (Config::nvtx)
  std::shared_ptr<std::atomic<bool>> stop_;  // told when failed_ is set, for sources mid-task

  mutable std::mutex mutex_;
  mutable std::condition_variable done_cv_;
  // Set once, under mutex_ (waiters wait on done_cv_); read without it where only the flag is wanted: a thread
  // that reads ahead asks of its last small read before every read (ReadGather::thread_reads_ahead), while a
  // worker completing that read holds the lock.
  std::atomic<bool> done_{false};
  Status first_error_;  // once done_: the request's outcome, OK or the error it ends with
  // The jobs' operations as they end, and once done_ (first_error_ OK) what get() returns. One Transfer rather
  // than a Report and a Result: a small request's state then fits glibc's per-thread cache of small blocks
  // (1 KiB), which a state of 1.1 KiB and more missed, taking the arena's lock (often another thread's).
  Transfer outcome_;
  Result<Transfer> outcome() const;  // a copy of the outcome (for callbacks), once done_
  std::vector<Callback> callbacks_;
  std::shared_ptr<RequestState> self_;  // keeps the state alive while jobs run
  std::function<void()> on_cancel_;       // a deferred request's (set once, before it is shared)
  std::function<std::uint64_t()> progress_;  // a deferred request's bytes_done (guarded by mutex_)
};

}  // namespace ferry::detail
