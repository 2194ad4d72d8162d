// RequestState: ops counted down as they retire, first-error-wins, completion and waiting.
#include "engine/request.hpp"

#include <chrono>

#include <fmt/format.h>

#include "engine/thread_pool.hpp"
#include "report/process_report.hpp"

namespace ferry::detail {
namespace {

// How long the workers leave a one-op request to the thread that submitted it, which usually waits for it
// next and runs it itself (docs/engine.md, "One small request at a time"). 50 us covers a Python caller's way
// from pread() to result(); a request nobody waits for or asks about starts that much later.
constexpr std::chrono::microseconds kSubmitterRunsGrace{50};

void run_callbacks(const std::vector<RequestState::Callback>& callbacks, const Result<Transfer>& result) {
  for (const auto& cb : callbacks) cb(result);
}

}  // namespace

std::shared_ptr<RequestState> RequestState::start(std::span<const Task> tasks, std::shared_ptr<RouteBackend> backend,
                                                  std::shared_ptr<OpQueue> queue, unsigned threads, EndOfFileRule eof,
                                                  OnComplete on_complete, bool trace_tasks,
                                                  std::shared_ptr<std::atomic<bool>> stop) {
  auto state = std::make_shared<RequestState>();
  state->trace_tasks_ = trace_tasks;
  state->stop_ = std::move(stop);
  state->eof_ = std::move(eof);
  state->backend_ = std::move(backend);
  state->on_complete_ = std::move(on_complete);
  state->ops_ = tasks.size();
  state->ops_left_ = tasks.size();
  // Room for the decision its ops are counted under, made here: the request mostly ends on this thread, which
  // should free no block a worker made.
  state->outcome_.report.reasons.reserve(1);
  if (tasks.empty()) {
    state->complete(/*callbacks_here=*/true);
    return state;
  }
  state->queue_ = queue ? std::move(queue) : std::make_shared<OpQueue>(threads);  // (it counts 0 as 1)
  state->self_ = state;
  // A one-op request is left to its submitter for a moment (wait() runs it on the caller's thread), unless it
  // came from a worker, which never waits for one.
  const auto grace = tasks.size() == 1 && !ThreadPool::on_worker_thread() ? kSubmitterRunsGrace
                                                                          : std::chrono::microseconds(0);
  state->pool_ticket_.store(state->queue_->push(*state, *state->backend_, tasks, grace), std::memory_order_release);
  return state;
}

std::shared_ptr<RequestState> RequestState::ready(Result<Transfer> result) {
  auto state = std::make_shared<RequestState>();
  state->complete_deferred(std::move(result));
  return state;
}

std::shared_ptr<RequestState> RequestState::deferred(std::weak_ptr<DeferredWork> work) {
  auto state = std::make_shared<RequestState>();
  state->work_ = std::move(work);
  return state;
}

void RequestState::complete_deferred(Result<Transfer> result) {
  if (result.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    bytes_done_.store(result->bytes, std::memory_order_relaxed);
    outcome_ = std::move(*result);
  }
  publish(result.status(), /*callbacks_here=*/false);
}

std::uint64_t RequestState::bytes_done() const {
  if (!done_.load(std::memory_order_acquire)) {
    if (auto work = work_.lock()) return work->bytes_done();
  }
  return bytes_done_.load(std::memory_order_relaxed);
}

bool RequestState::fail(Status s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_.load(std::memory_order_relaxed) || !first_error_.ok()) return false;
  first_error_ = std::move(s);
  failed_.store(true, std::memory_order_release);
  if (stop_) stop_->store(true, std::memory_order_release);
  return true;
}

void RequestState::cancel() {
  if (auto work = work_.lock()) {  // a deferred request: its work stops itself and then completes it
    if (!done()) work->cancel();
    return;
  }
  // Its ops may be waiting with no worker at the queue (no room in the pinned budget): a worker drops them.
  if (fail(Status(ErrorCode::cancelled, "the request was cancelled")) && queue_) queue_->restart();
}

Status EndOfFileRule::shrank(const Task& t, std::uint64_t bytes) const {
  return Status(ErrorCode::io_error,
                fmt::format("\"{}\" ended at offset {} while it was being read, but it held {} bytes when the read "
                            "began: it shrank during the read, so the data read is not one version of the file "
                            "(bytes of the destination past that offset may have been written)",
                            *path, t.file_offset + bytes, size_at_start),
                0, *path);
}

bool RequestState::claim() {
  return ops_ != 1 || !claimed_.exchange(true, std::memory_order_acq_rel);
}

void RequestState::drop(std::size_t n) {
  if (ops_left_.fetch_sub(n, std::memory_order_acq_rel) == n) complete(/*callbacks_here=*/false);
}

void RequestState::retire(std::span<const Op> ops, std::span<Result<std::uint64_t>> results, Report& report,
                          std::uint64_t ns_each, bool gathered, bool callbacks_here) {
  // Ops that share a decision are counted together, and the request's bytes grow once a take: with a batch's
  // thousands of pieces on every worker, a shared counter touched per piece is contended.
  std::uint64_t bytes = 0;
  const Decision* counting = nullptr;
  std::uint64_t run_ops = 0, run_bytes = 0;
  auto count_run = [&] {
    if (run_ops > 0) {
      report.count(counting->route, counting->reason, counting->detail, run_bytes, ns_each * run_ops, run_ops);
    }
    run_ops = run_bytes = 0;
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Task& t = ops[i].task;
    if (!results[i].ok()) {
      fail(results[i].status());
      continue;
    }
    const std::uint64_t moved = *results[i];
    if (moved < t.length && !eof_.short_task_ends_request) fail(eof_.shrank(t, moved));
    const Decision& decision = backend_->decision_for(t);
    if (&decision != counting) {
      count_run();
      counting = &decision;
    }
    ++run_ops;
    run_bytes += moved;
    bytes += moved;
  }
  count_run();
  if (gathered) report.io.gathered_ops += ops.size();
  bytes_done_.fetch_add(bytes, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outcome_.report.merge(report);  // into the room start() made: no block of the worker's goes with the request
  }
  if (ops_left_.fetch_sub(ops.size(), std::memory_order_acq_rel) == ops.size()) complete(callbacks_here);
}

void RequestState::complete(bool callbacks_here) {
  Status status;
  // The backend's finish_request settles the status; then the backend lets go of the File's state (its
  // descriptors, and the Syscalls they were opened with) before anyone can see the request done, so that no
  // descriptor closes on this worker behind a caller that destroyed the File once get() returned.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status = first_error_;
    if (backend_) status = backend_->finish_request(outcome_.report, status);
  }
  if (backend_) backend_->let_go();
  if (on_complete_) on_complete_(outcome_.report, status, bytes_done_.load(std::memory_order_relaxed));
  add_to_process_report(outcome_.report);
  publish(std::move(status), callbacks_here);
  // Drop the self-reference last: waiters and callbacks may hold their own references. (Only start(), before
  // the ops were queued, and this, after the last one retired, touch it.)
  auto keep = std::move(self_);
}

void RequestState::publish(Status status, bool callbacks_here) {
  std::vector<Callback> callbacks;
  std::optional<Result<Transfer>> result;  // the common case: nobody but get() needs the outcome
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outcome_.bytes = bytes_done_.load(std::memory_order_relaxed);
    first_error_ = std::move(status);
    callbacks.swap(callbacks_);
    if (!callbacks.empty()) result = outcome();
    done_.store(true, std::memory_order_release);
  }
  done_cv_.notify_all();
  if (callbacks.empty()) return;
  if (callbacks_here) {
    run_callbacks(callbacks, *result);
    return;
  }
  // Up to one worker: a process that made only stream-ordered requests has none yet.
  shared_pool().submit([callbacks = std::move(callbacks), result = std::move(*result)] {
    run_callbacks(callbacks, result);
  }, /*grow_to=*/1);
}

bool RequestState::done() const {
  if (done_.load(std::memory_order_acquire)) return true;
  expedite();
  return false;
}

void RequestState::expedite() const {
  const std::uint64_t ticket = pool_ticket_.load(std::memory_order_acquire);
  if (ticket == 0 || expedited_.load(std::memory_order_relaxed) || expedited_.exchange(true)) return;
  shared_pool().expedite(ticket);
}

void RequestState::run_here_if_unclaimed() const {
  // Only a request of one op: running it on the caller's thread saves two thread hand-offs (most of a small
  // read's latency) and cannot keep the caller long.
  if (ops_ != 1 || ThreadPool::on_worker_thread()) return;
  auto* self = const_cast<RequestState*>(this);
  if (!self->claim()) return;
  queue_->withdraw(*this, pool_ticket_.load(std::memory_order_acquire));
  const Op op = push_node_.first.op;  // written by push() before the request was shared
  Result<std::uint64_t> got(std::uint64_t{0});
  Report report;
  const auto started = std::chrono::steady_clock::now();
  if (!stop_requested()) {
    auto borrowed = backend_->borrow_thread();  // the caller's CUDA context comes back afterwards
    auto worker = backend_->make_worker(WorkerWait{});  // the caller's own thread may wait for pinned memory
    if (worker.ok()) {
      (*worker)->run(std::span<const Op>(&op, 1), std::span<Report>(&report, 1),
                     std::span<Result<std::uint64_t>>(&got, 1));
      if (Status finished = (*worker)->finish(); !finished.ok()) got = finished;
    } else {
      got = worker.status();
    }
  } else {
    got = Status(ErrorCode::cancelled, "the request was cancelled");
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started);
  self->retire(std::span<const Op>(&op, 1), std::span<Result<std::uint64_t>>(&got, 1), report,
               static_cast<std::uint64_t>(ns.count()), /*gathered=*/false, /*callbacks_here=*/true);
}

bool RequestState::help_until(std::optional<std::chrono::steady_clock::time_point> deadline) const {
  // Never block a worker: run queued jobs (perhaps a drainer of this very request's ops) while waiting.
  for (;;) {
    if (done()) return true;
    if (deadline && std::chrono::steady_clock::now() >= *deadline) return false;
    if (shared_pool().help_one()) continue;
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait_for(lock, std::chrono::microseconds(200), [this] { return done_.load(std::memory_order_relaxed); });
  }
}

void RequestState::wait() const {
  // Done already (the usual oldest read of many in flight): no claim, no lock, nothing the worker wrote but this.
  if (done_.load(std::memory_order_acquire)) return;
  if (ThreadPool::on_worker_thread()) {
    help_until(std::nullopt);
    return;
  }
  run_here_if_unclaimed();
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return done_.load(std::memory_order_relaxed); });
}

bool RequestState::wait_for(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (ThreadPool::on_worker_thread()) return help_until(deadline);
  expedite();  // (no running it here: that could outlast the timeout)
  std::unique_lock<std::mutex> lock(mutex_);
  return done_cv_.wait_until(lock, deadline, [this] { return done_.load(std::memory_order_relaxed); });
}

Result<Transfer> RequestState::take_result() {
  wait();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!first_error_.ok()) return first_error_;
  return std::move(outcome_);  // Future::get() is the one taker
}

Result<Transfer> RequestState::outcome() const {
  if (!first_error_.ok()) return first_error_;
  return outcome_;
}

void RequestState::then(Callback callback) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_.load(std::memory_order_relaxed)) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(outcome());
}

}  // namespace ferry::detail
