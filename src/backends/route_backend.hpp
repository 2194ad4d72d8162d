// What every route backend (host, staged, cuFile) gives the engine: the request's side (its decision, how its
// source sees it, where its bytes go) and workers that move the bytes of ops. The engine (engine/queue.hpp)
// runs ops through them; defined here, beside the backends, so that the read path's includes run downward.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "base/decision.hpp"
#include "base/destination.hpp"
#include "base/task.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"
#include "source/source.hpp"

namespace ferry::detail {

class RouteBackend;

/// One op: a task of a request, and that request's backend.
struct Op {
  Task task;
  RouteBackend* request = nullptr;
};

/// Op `i`'s report among run()'s `reports` (one for all, or one each).
inline Report& report_of(std::span<Report> reports, std::size_t i) { return reports[reports.size() == 1 ? 0 : i]; }

/// Moves the bytes of ops, on one thread at a time. A worker made by one request's backend runs the ops of
/// every request it is shared with (RouteBackend::shares_workers): what differs between them (the source's view,
/// the destination) comes with each op.
class RouteWorker {
 public:
  virtual ~RouteWorker() = default;
  /// Runs `ops`: results[i] is op i's bytes (fewer than its length only where the data ends), and its I/O
  /// counters go to report_of(reports, i). Copies to the GPU may still be in flight when it returns: the ops
  /// have landed once landed(last_fill()) says so.
  virtual void run(std::span<const Op> ops, std::span<Report> reports, std::span<Result<std::uint64_t>> results) = 0;
  /// What run() queued last, for landed(); 0 when nothing it ran is in flight.
  virtual std::uint64_t last_fill() const { return 0; }
  /// Whether `fill` has landed, without waiting (a copy's error shows in finish()).
  virtual bool landed(std::uint64_t /*fill*/) { return true; }
  /// Waits until `fill` (and everything before it) has landed, yielding the core meanwhile.
  virtual Status wait_landed(std::uint64_t /*fill*/) { return Status(); }
  /// Waits for everything in flight and gives the worker's resources back: the worker's last call. After an
  /// error, nothing that was in flight may be taken as landed.
  virtual Status finish() { return Status(); }
  /// Whether it holds pinned staging (a kit of the pinned budget), which it gives back when others wait.
  virtual bool holds_pinned() const { return false; }
};

/// Who asks for a worker, and what happens when the pinned budget has no room for its staging now.
struct WorkerWait {
  const void* owner = nullptr;      // the queue asking: its own other workers do not give way to it
  const std::function<void()>* when_room = nullptr;  // null: wait for room; else: no worker now, and a copy
                                                     // of this runs once later
};

/// One request's side of a route.
class RouteBackend {
 public:
  virtual ~RouteBackend() = default;
  /// A worker for this request's ops, and for those of the requests it shares workers with. Null (with
  /// `wait.when_room` set) when the pinned budget has no room for its staging now.
  virtual Result<std::unique_ptr<RouteWorker>> make_worker(const WorkerWait& wait) = 0;
  /// The decision the request's operations are counted under.
  const Decision& decision() const { return decision_; }
  /// The decision op `t` is counted under: decision() unless the backend sends some ops another way (the
  /// cuFile route reads a request's unaligned edges through a bounce buffer).
  virtual const Decision& decision_for(const Task& /*t*/) const { return decision(); }
  /// Whether this request's ops share a queue with the other requests of its file, route and GPU, run by a
  /// worker made by any of them (one that keeps nothing of any one request); false: a queue of their own.
  bool shares_workers() const { return shares_workers_; }
  /// How many bytes of ops a worker takes at once (one bounce buffer), at most its share of the ops waiting;
  /// longer ops go one a take. 0: ops_together() ops a take (a route that moves each op on its own gains
  /// nothing from taking more, and would only run ops after a failure).
  virtual std::uint64_t fill_bytes() const { return 0; }
  /// Whether op `t` is a small one expected to come from memory (Source::reads_from_memory): several such ops
  /// share a worker, while ops that wait for a disk each get one.
  bool from_memory(const Task& t) const { return source_ && source_->reads_from_memory(t.length); }
  /// How many ops a worker takes at once at least, where there are that many: a source that keeps several in
  /// flight together (io_uring) wants its queue's depth.
  virtual std::size_t ops_together() const { return 1; }
  /// Runs once after every op retired: may re-attribute operations (cuFile statistics) or fail a request
  /// that succeeded (strict mode). Returns the request's final status.
  virtual Status finish_request(Report& /*report*/, Status status) { return status; }
  /// At the request's completion, before anyone can see it done: lets go of what it holds of the File (its
  /// source, cuFile handle), which may be closed and destroyed from then on. The backend itself goes with the
  /// request, mostly on the thread that made both (docs/engine.md, "One small request at a time").
  virtual void let_go() { source_ = nullptr; }
  /// Held while a worker runs on a caller's thread (a waiter running its request itself): puts back what
  /// the worker changes of that thread (its current CUDA context) when released. Null when nothing changes.
  virtual std::shared_ptr<void> borrow_thread() { return nullptr; }

  const SourceRequest& source_request() const { return source_request_; }
  const Destination& destination() const { return destination_; }
  Source* source() const { return source_; }

 protected:
  RouteBackend(SourceRequest source_request, Destination destination, Decision decision,
               Source* source, bool shares_workers)
      : source_request_(std::move(source_request)),
        destination_(std::move(destination)),
        decision_(std::move(decision)),
        source_(source),
        shares_workers_(shares_workers) {}

 private:
  SourceRequest source_request_;
  Destination destination_;  // task buffer offsets index into it (base 0: tasks carry their addresses)
  Decision decision_;
  // The file's bytes; null for cuFile, which moves them itself. The FileState owns it and outlives the request's
  // ops (they hold a use of it): a plain pointer, so that no request writes a count the workers write too.
  Source* source_;
  bool shares_workers_;
};

}  // namespace ferry::detail
