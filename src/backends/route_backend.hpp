// What every route backend (host, staged, cuFile) gives the engine: a worker per job that moves the bytes of
// tasks, and the decision its operations are counted under. The engine (engine/request.hpp) runs requests
// through it; defined here, beside the backends, so that the read path's includes run downward.
#pragma once

#include <memory>
#include <span>

#include "base/decision.hpp"
#include "base/task.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

/// Task `i`'s report among run_batch's `reports` (one for all, or one each).
inline Report& report_of(std::span<Report> reports, std::size_t i) { return reports[reports.size() == 1 ? 0 : i]; }

/// Moves the bytes of tasks, one worker per job (not shared between threads).
class RouteWorker {
 public:
  virtual ~RouteWorker() = default;
  /// Bytes transferred: fewer than t.length only when a read reached EOF.
  virtual Result<std::uint64_t> run(const Task& t, Report& report) = 0;
  /// Runs several tasks; results[i] is what run() would answer for tasks[i]. `reports` holds one report
  /// for all of them, or one per task (gathered reads, each its own request: file/read_gather.hpp).
  /// Called only when the backend's tasks_per_take() > 1, or for gathered reads.
  virtual void run_batch(std::span<const Task> tasks, std::span<Report> reports,
                         std::span<Result<std::uint64_t>> results) {
    for (std::size_t i = 0; i < tasks.size(); ++i) results[i] = run(tasks[i], report_of(reports, i));
  }
  /// Waits for the worker's outstanding asynchronous work (copies in flight).
  virtual Status finish(Report& /*report*/) { return Status(); }
  /// Whether finish() would wait now (copies still running): the engine then leaves the job's end for later
  /// while other jobs wait (ThreadPool::park). Asked on the job's thread, perhaps in another job's context.
  virtual bool finish_would_wait() { return false; }
  /// The worker's job goes on, perhaps on another thread than before (jobs yield to queued work between
  /// tasks): it makes that thread ready (the GPU's context current).
  virtual Status resume() { return Status(); }
};

/// What a request needs from a route's backend.
class RouteBackend {
 public:
  virtual ~RouteBackend() = default;
  virtual Result<std::unique_ptr<RouteWorker>> make_worker() = 0;
  /// The decision the request's operations are counted under.
  virtual const Decision& decision() const = 0;
  /// How many tasks a worker takes at once: several where the source keeps them in flight together or a
  /// batch's small pieces are packed into one bounce buffer. A request makes no more jobs than its tasks
  /// fill, so that no worker is set up (staging pinned, a stream synchronised) to find nothing left.
  virtual std::size_t tasks_per_take() const { return 1; }
  /// The decision task `t` is counted under: decision() unless the backend sends some tasks another way
  /// (the cuFile route reads a request's unaligned edges through a bounce buffer).
  virtual const Decision& decision_for(const Task& /*t*/) const { return decision(); }
  /// Runs once after every job stopped: may re-attribute operations (cuFile statistics) or fail a
  /// request that succeeded (strict mode). Returns the request's final status.
  virtual Status finish_request(Report& /*report*/, Status status) { return status; }
  /// Held while a job runs on a caller's thread (a waiter running a request itself): puts back what the
  /// job changes of that thread (its current CUDA context) when released. Null when nothing changes.
  virtual std::shared_ptr<void> borrow_thread() { return nullptr; }
};

}  // namespace ferry::detail
