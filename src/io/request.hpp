// One request in flight: its tasks, the jobs that pull them, and the shared state behind a Future.
//
// A request runs as min(threads, tasks) jobs on the shared pool. Each job owns a RouteWorker (per-thread
// resources such as bounce buffers and a stream) and pulls task indices from an atomic counter until none
// are left or any task failed. The request completes only when every job has stopped, so after a
// failure nothing writes into the caller's buffer any more.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "ferry/route.hpp"
#include "ferry/status.hpp"
#include "io/task_split.hpp"
#include "route/decision.hpp"

namespace ferry::detail {

/// Moves the bytes of tasks, one worker per job (not shared between threads).
class RouteWorker {
 public:
  virtual ~RouteWorker() = default;
  /// Bytes transferred: fewer than t.length only when a read reached EOF.
  virtual Result<std::uint64_t> run(const Task& t, Report& report) = 0;
  /// How many tasks the worker takes at once (a source with a queue keeps them in flight together).
  virtual std::size_t batch_size() const { return 1; }
  /// Runs several tasks; results[i] is what run() would answer for tasks[i]. Called only when
  /// batch_size() > 1.
  virtual void run_batch(std::span<const Task> tasks, Report& report, std::span<Result<std::uint64_t>> results) {
    for (std::size_t i = 0; i < tasks.size(); ++i) results[i] = run(tasks[i], report);
  }
  /// Waits for the worker's outstanding asynchronous work (copies in flight).
  virtual Status finish(Report& /*report*/) { return Status(); }
};

/// What a request needs from a route's backend.
class RouteBackend {
 public:
  virtual ~RouteBackend() = default;
  virtual Result<std::unique_ptr<RouteWorker>> make_worker() = 0;
  /// The decision the request's operations are counted under.
  virtual const Decision& decision() const = 0;
  /// The decision task `t` is counted under: decision() unless the backend sends some tasks another way
  /// (the cuFile route reads a request's unaligned edges through a bounce buffer).
  virtual const Decision& decision_for(const Task& /*t*/) const { return decision(); }
  /// Runs once after every job stopped: may re-attribute operations (cuFile statistics) or fail a
  /// request that succeeded (strict mode). Returns the request's final status.
  virtual Status finish_request(Report& /*report*/, Status status) { return status; }
};

/// What a read expects of the file: tasks cover the file as it was when the request began, so a task
/// that comes back short means the file shrank under the read (an error: other tasks may already have
/// written past that point). Only a read of a file whose size cannot be known (/proc, character devices)
/// is one sequential task that may end early.
struct EndOfFileRule {
  bool short_task_ends_request = false;  // size unknown: a short task is the end of the data
  std::string path;                      // for the error otherwise
  std::uint64_t size_at_start = 0;
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
  static std::shared_ptr<RequestState> start(std::vector<Task> tasks, std::shared_ptr<RouteBackend> backend,
                                             unsigned threads, EndOfFileRule eof,
                                             std::function<void(Report&)> on_complete, bool trace_tasks = false,
                                             std::shared_ptr<std::atomic<bool>> stop = nullptr);
  /// A request that failed before any I/O.
  static std::shared_ptr<RequestState> failed(Status status);
  /// A request whose work begins later (a stream-ordered request, once its stream reaches it). It is
  /// done when complete_deferred() is called; link() hands it the request that does the work, for
  /// bytes_done() and cancel().
  static std::shared_ptr<RequestState> deferred();
  void link(const std::shared_ptr<RequestState>& inner);
  /// A deferred request is about to begin its work: false when it was cancelled first (it then ended
  /// already, and must not begin). After this, cancel() is forwarded to the linked request.
  bool try_begin();
  void complete_deferred(Result<Transfer> result);

  bool done() const;
  /// Stops the request at the next task boundary: no task starts after this, tasks already running
  /// finish, and the request fails with `cancelled` (unless it had completed or failed already).
  void cancel();
  std::uint64_t bytes_done() const;
  void wait() const;
  bool wait_for(std::chrono::milliseconds timeout) const;
  Result<Transfer> take_result();
  void then(Callback callback);

 private:
  void run_job();
  void run_tasks(Report& local);  // the job's worker pulls tasks until none are left or one failed
  void record_error(Status s);
  Status ended_early(const Task& t, std::uint64_t bytes) const;
  void complete();

  std::vector<Task> tasks_;
  EndOfFileRule eof_;
  std::shared_ptr<RouteBackend> backend_;
  std::function<void(Report&)> on_complete_;
  std::atomic<std::size_t> next_task_{0};
  std::atomic<unsigned> active_jobs_{0};
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> bytes_done_{0};
  bool trace_tasks_ = false;  // an NVTX range around each task (Config::nvtx)
  std::shared_ptr<std::atomic<bool>> stop_;  // told when failed_ is set, for sources mid-task

  mutable std::mutex mutex_;
  mutable std::condition_variable done_cv_;
  bool done_ = false;
  Status first_error_;
  Report report_;
  std::optional<Result<Transfer>> result_;
  std::vector<Callback> callbacks_;
  std::shared_ptr<RequestState> self_;  // keeps the state alive while jobs run
  std::shared_ptr<RequestState> inner_;  // a deferred request's work, once it began (guarded by mutex_)
  bool deferred_ = false, begun_ = false;  // a deferred request; whether its work began (mutex_)
};

}  // namespace ferry::detail
