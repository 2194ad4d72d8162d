// RequestState: jobs pulling tasks, first-error-wins, completion and waiting.
#include "engine/request.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "engine/thread_pool.hpp"
#include "platform/nvtx/nvtx.hpp"
#include "report/process_report.hpp"

namespace ferry::detail {
namespace {

// How long the workers leave a one-job request to the thread that submitted it. Such a request's
// submitter usually waits for it next, and then runs it itself (run_here_if_unclaimed): a worker woken
// for it would cost the submitter a wake (a system call) and, if the worker won, the submitter a second
// wait for the worker's wake. On the GPU machine each hand-off is several microseconds, as long as a hot
// 4 KiB read. 50 us covers a Python caller's way from pread() to result(); a request nobody waits for
// or asks about (done(), wait_for(), then() of a caller that leaves end the grace: expedite()) starts that
// much later.
constexpr std::chrono::microseconds kSubmitterRunsGrace{50};

// How long a job runs before it lets queued brief work go first. A hot 4 MiB task takes about this long on
// the H200 machine with every worker busy, so a large request yields after about every task; smaller tasks
// are taken many to a turn, because a turn costs a trip through the pool's queue (and often a wake). With
// two batches of 4 KiB pieces in flight, yielding after every piece held the host route to a twentieth of
// the page cache's rate there. Lasting jobs do not yield to one another: two 256 MiB batches in flight took
// turns and ended together, 0.80x of the rate in the order they came (bench/results/2026-12-03-h200-copy-queue).
constexpr std::chrono::milliseconds kTurn{1};

// Runs a request's callbacks (user code). A job's end parked on this worker thread goes first: a callback that
// blocked here until that request was done (on anything but a Ferry wait, which runs it) would never see it.
void run_callbacks(const std::vector<RequestState::Callback>& callbacks, const Result<Transfer>& result) {
  ThreadPool::run_parked(/*only_if_ready=*/false);
  for (const auto& cb : callbacks) cb(result);
}

}  // namespace

std::shared_ptr<RequestState> RequestState::start(std::vector<Task> tasks, std::shared_ptr<RouteBackend> backend,
                                                  unsigned threads, EndOfFileRule eof,
                                                  std::function<void(Report&)> on_complete, bool trace_tasks,
                                                  std::shared_ptr<std::atomic<bool>> stop, Submitter next) {
  auto state = std::make_shared<RequestState>();
  state->trace_tasks_ = trace_tasks;
  state->stop_ = std::move(stop);
  state->tasks_ = std::move(tasks);
  state->eof_ = std::move(eof);
  state->backend_ = std::move(backend);
  state->on_complete_ = std::move(on_complete);
  const std::size_t take = state->backend_ ? std::max<std::size_t>(1, state->backend_->tasks_per_take()) : 1;
  const std::size_t takes = (state->tasks_.size() + take - 1) / take;
  unsigned jobs = static_cast<unsigned>(std::min<std::size_t>(std::max(1u, threads), takes));
  if (jobs == 0) {
    state->complete(CallbacksOn::here);
    return state;
  }
  state->self_ = state;
  state->active_jobs_ = jobs;
  state->jobs_ = jobs;
  state->unclaimed_jobs_ = jobs;
  state->single_job_ = jobs == 1;
  // The pool grows while jobs wait for a worker, up to `threads`: a two-task read needs two workers, and
  // 64 one-task reads in flight need as many as `threads` allows. A one-job request is left to its
  // submitter for a moment (wait() runs it on the caller's thread) unless it came from a worker or from a
  // thread that reads ahead: that one waits for an older request first, and a read from a disk held back
  // for the grace period is that much less depth for the disk (cold 4 KiB reads from 16 threads).
  ThreadPool& pool = shared_pool();
  const auto grace = state->single_job_ && next == Submitter::may_wait_next && !ThreadPool::on_worker_thread()
                         ? kSubmitterRunsGrace
                         : std::chrono::microseconds(0);
  // Jobs with more than one take each pull tasks until none are left: they let brief work go first, not
  // each other (run_tasks).
  const JobLength length = takes > jobs ? JobLength::lasting : JobLength::brief;
  for (unsigned j = 0; j < jobs; ++j) {
    const std::uint64_t ticket =
        pool.submit(PoolJob(&RequestState::run_queued_job, state), std::max(1u, threads), grace, length);
    if (grace.count() > 0) state->pool_ticket_ = ticket;
  }
  return state;
}

std::shared_ptr<RequestState> RequestState::failed(Status status) {
  auto state = std::make_shared<RequestState>();
  state->first_error_ = std::move(status);
  state->failed_ = true;
  state->complete(CallbacksOn::here);
  return state;
}

std::shared_ptr<RequestState> RequestState::deferred(std::function<void()> on_cancel) {
  auto state = std::make_shared<RequestState>();
  state->on_cancel_ = std::move(on_cancel);
  return state;
}

void RequestState::set_progress(std::function<std::uint64_t()> progress) {
  std::lock_guard<std::mutex> lock(mutex_);
  progress_ = std::move(progress);
}

void RequestState::complete_deferred(Result<Transfer> result, CallbacksOn where) {
  std::vector<Callback> callbacks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_.load(std::memory_order_relaxed)) return;
    if (!first_error_.ok()) result = first_error_;  // cancelled (a deferred request without on_cancel)
    callbacks.swap(callbacks_);
    if (result.ok()) {
      bytes_done_.store(result->bytes, std::memory_order_relaxed);
      outcome_ = callbacks.empty() ? std::move(*result) : *result;  // callbacks get `result` itself
    } else {
      first_error_ = result.status();
    }
    done_.store(true, std::memory_order_release);
    progress_ = nullptr;
  }
  done_cv_.notify_all();
  if (callbacks.empty()) return;
  if (where == CallbacksOn::here) {
    run_callbacks(callbacks, result);
    return;
  }
  shared_pool().ensure_workers(1);  // a process that made only stream-ordered requests has no worker yet
  shared_pool().submit([callbacks = std::move(callbacks), result = std::move(result)] {
    run_callbacks(callbacks, result);
  });
}

std::uint64_t RequestState::bytes_done() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (progress_) return progress_();
  }
  return bytes_done_.load(std::memory_order_relaxed);
}

void RequestState::record_error(Status s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (first_error_.ok()) first_error_ = std::move(s);
  failed_.store(true, std::memory_order_release);
  if (stop_) stop_->store(true, std::memory_order_release);
}

void RequestState::cancel() {
  if (on_cancel_) {  // a deferred request: its work stops itself and then completes it
    if (!done()) on_cancel_();
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_.load(std::memory_order_relaxed) || !first_error_.ok()) return;
  first_error_ = Status(ErrorCode::cancelled, "the request was cancelled");
  failed_.store(true, std::memory_order_release);
  if (stop_) stop_->store(true, std::memory_order_release);
}

Status EndOfFileRule::shrank(const Task& t, std::uint64_t bytes) const {
  return Status(ErrorCode::io_error,
                fmt::format("\"{}\" ended at offset {} while it was being read, but it held {} bytes when the read "
                            "began: it shrank during the read, so the data read is not one version of the file "
                            "(bytes of the destination past that offset may have been written)",
                            path, t.file_offset + bytes, size_at_start),
                0, path);
}

void RequestState::run_queued_job(void* state) {
  auto* self = static_cast<RequestState*>(state);
  if (self->claim_job()) self->run_job(std::make_shared<Job>());
}

bool RequestState::claim_job() {
  unsigned left = unclaimed_jobs_.load(std::memory_order_acquire);
  while (left > 0) {
    if (unclaimed_jobs_.compare_exchange_weak(left, left - 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void RequestState::run_job(std::shared_ptr<Job> job) {
  if (work_on(*job, /*may_yield=*/true) == Continue::later) {
    // Brief work is queued: this job goes behind it, keeping its worker, so that a small request never
    // waits for a large one's tasks to drain.
    shared_pool().submit([self = self_, job] { self->run_job(job); }, 0, std::chrono::microseconds(0),
                         JobLength::lasting);
    return;
  }
  // Its copies still running and more jobs waiting than this request has, a job of a large read leaves its end
  // on this thread, which reads for the next job meanwhile and ends this one once the copies are done: a
  // worker that waited for them here left the copy engine without the next data (16 MiB reads with 64 in
  // flight 1.11-1.14x; bench/results/2026-12-04-h200-parked-ends). With less queued, the request is one a
  // caller waits for next, and its end, later by up to a take, held back what the caller sends next. Batches
  // (several tasks a take) end at once: parking them lost with two in flight (0.80-0.94x). A one-task request
  // is a small read whose caller waits for it, behind a short copy.
  if (job->worker && tasks_.size() > 1 && backend_->tasks_per_take() == 1 && ThreadPool::may_park() &&
      !failed_.load(std::memory_order_acquire) && shared_pool().queued() > jobs_ && job->worker->finish_would_wait()) {
    RouteWorker* worker = job->worker.get();
    ThreadPool::park([self = self_, job] { self->end_parked_job(*job); },
                     [worker] { return !worker->finish_would_wait(); });
    return;
  }
  end_job(*job, CallbacksOn::here);
}

void RequestState::end_parked_job(Job& job) {
  if (job.worker) {
    if (Status resumed = job.worker->resume(); !resumed.ok()) record_error(resumed);
  }
  end_job(job, CallbacksOn::pool);  // this thread may be in the middle of another job: no user code here
}

RequestState::Continue RequestState::work_on(Job& job, bool may_yield) {
  // A job of a request cancelled or failed before it began makes no worker (and pins nothing).
  if (!job.started) {
    job.started = true;
    if (!failed_.load(std::memory_order_acquire)) {
      if (trace_tasks_) nvtx::push("ferry worker set-up");
      auto worker = backend_->make_worker();
      if (trace_tasks_) nvtx::pop();
      if (worker.ok()) {
        job.worker = std::move(*worker);
      } else {
        record_error(worker.status());
      }
    }
  } else if (job.worker) {
    if (Status resumed = job.worker->resume(); !resumed.ok()) record_error(resumed);
  }
  return job.worker ? run_tasks(job, may_yield) : Continue::done;
}

void RequestState::end_job(Job& job, CallbacksOn callbacks) {
  if (job.worker) {
    if (trace_tasks_) nvtx::push("ferry worker finish");
    Status finished = job.worker->finish(job.local);
    if (trace_tasks_) nvtx::pop();
    if (!finished.ok()) record_error(finished);
    job.worker.reset();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (single_job_) {
      outcome_.report = std::move(job.local);  // the only one: no copy of its reasons (an allocation each)
    } else {
      outcome_.report.merge(job.local);
    }
  }
  if (active_jobs_.fetch_sub(1, std::memory_order_acq_rel) == 1) complete(callbacks);
}

RequestState::Continue RequestState::run_tasks(Job& job, bool may_yield) {
  RouteWorker& worker = *job.worker;
  Report& local = job.local;
  const std::size_t batch = std::max<std::size_t>(1, backend_->tasks_per_take());
  Result<std::uint64_t> one_result(std::uint64_t{0});  // a take of one task needs no vector
  std::span<Result<std::uint64_t>> results(&one_result, 1);
  if (batch > 1) {
    if (job.results.size() != batch) job.results.assign(batch, Result<std::uint64_t>(std::uint64_t{0}));
    results = job.results;
  }
  const auto turn_ends = std::chrono::steady_clock::now() + kTurn;
  while (!failed_.load(std::memory_order_acquire)) {
    std::size_t first = next_task_.fetch_add(batch, std::memory_order_relaxed);
    if (first >= tasks_.size()) break;
    std::span<const Task> slice(tasks_.data() + first, std::min(batch, tasks_.size() - first));
    auto started = std::chrono::steady_clock::now();
    if (trace_tasks_) {
      std::uint64_t bytes = 0;
      for (const Task& t : slice) bytes += t.length;
      std::string label = fmt::format("ferry task{} {} {} bytes at offset {}", slice.size() > 1 ? "s" : "",
                                      route_name(backend_->decision_for(slice[0]).route), bytes, slice[0].file_offset);
      nvtx::push(label.c_str());
    }
    if (batch == 1) {
      results[0] = worker.run(slice[0], local);
    } else {
      worker.run_batch(slice, std::span<Report>(&local, 1), std::span(results.data(), slice.size()));
    }
    if (trace_tasks_) nvtx::pop();
    // An earlier job's end parked on this thread goes as soon as its copies are done, not after this job.
    if (ThreadPool::run_parked(/*only_if_ready=*/true)) {
      if (Status resumed = worker.resume(); !resumed.ok()) record_error(resumed);
    }
    const auto ended = std::chrono::steady_clock::now();
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(ended - started);
    const auto ns_each = static_cast<std::uint64_t>(ns.count()) / slice.size();
    // Tasks that share a decision are counted together, and the request's bytes grow once a slice: with
    // a batch's thousands of pieces on every worker, a shared counter touched per piece is contended.
    std::uint64_t slice_bytes = 0;
    const Decision* counting = nullptr;
    std::uint64_t run_ops = 0, run_bytes = 0;
    auto count_run = [&] {
      if (run_ops > 0) {
        local.count(counting->route, counting->reason, counting->detail, run_bytes, ns_each * run_ops, run_ops);
      }
      run_ops = run_bytes = 0;
    };
    bool failed = false;
    for (std::size_t i = 0; i < slice.size(); ++i) {
      const Task& t = slice[i];
      if (!results[i].ok()) {
        record_error(results[i].status());
        failed = true;
        break;
      }
      const std::uint64_t bytes = *results[i];
      const Decision& decision = backend_->decision_for(t);
      if (&decision != counting) {
        count_run();
        counting = &decision;
      }
      ++run_ops;
      run_bytes += bytes;
      slice_bytes += bytes;
      if (bytes < t.length && !eof_.short_task_ends_request) {
        record_error(eof_.shrank(t, bytes));
        failed = true;
        break;
      }
    }
    count_run();
    bytes_done_.fetch_add(slice_bytes, std::memory_order_relaxed);
    if (failed) return Continue::done;
    if (may_yield && ended >= turn_ends && next_task_.load(std::memory_order_relaxed) < tasks_.size() &&
        shared_pool().queued_brief() > 0) {
      return Continue::later;
    }
  }
  return Continue::done;
}

void RequestState::complete(CallbacksOn where) {
  std::vector<Callback> callbacks;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status = first_error_;
    if (backend_) status = backend_->finish_request(outcome_.report, status);
  }
  // Release the route's resources before anyone can see the request done: they hold the File's state
  // (descriptors, and the Syscalls they were opened with). Otherwise the last reference could drop on
  // this worker after get() returned, closing descriptors behind a caller that already destroyed the
  // File (and whatever it was opened with).
  std::shared_ptr<RouteBackend> backend;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    backend.swap(backend_);
  }
  backend.reset();
  if (on_complete_) on_complete_(outcome_.report);
  add_to_process_report(outcome_.report);
  std::optional<Result<Transfer>> for_callbacks;  // the common case: nobody but get() needs the outcome
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outcome_.bytes = bytes_done_.load(std::memory_order_relaxed);
    first_error_ = status;
    callbacks.swap(callbacks_);
    if (!callbacks.empty()) for_callbacks = outcome();
    done_.store(true, std::memory_order_release);
  }
  done_cv_.notify_all();
  if (where == CallbacksOn::pool && !callbacks.empty()) {
    shared_pool().submit([callbacks = std::move(callbacks), result = std::move(*for_callbacks)] {
      run_callbacks(callbacks, result);
    });
  } else if (!callbacks.empty()) {
    run_callbacks(callbacks, *for_callbacks);
  }
  // Drop the self-reference last: waiters and callbacks may hold their own references.
  std::shared_ptr<RequestState> keep;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    keep.swap(self_);
  }
}

bool RequestState::finished() const { return done_.load(std::memory_order_acquire); }

bool RequestState::has_callbacks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !callbacks_.empty();
}

bool RequestState::done() const {
  if (done_.load(std::memory_order_acquire)) return true;
  expedite();
  return false;
}

void RequestState::expedite() const {
  if (pool_ticket_ == 0 || expedited_.load(std::memory_order_relaxed) || expedited_.exchange(true)) return;
  shared_pool().expedite(pool_ticket_);
}

bool RequestState::run_here_if_unclaimed(std::size_t max_tasks) const {
  // Only a request of one job: running it on the caller's thread saves two thread hand-offs (most of a
  // small read's latency) and cannot keep the caller long.
  if (!single_job_ || tasks_.size() > max_tasks || ThreadPool::on_worker_thread()) return false;
  auto* self = const_cast<RequestState*>(this);
  if (!self->claim_job()) return false;
  if (pool_ticket_ != 0) shared_pool().withdraw(pool_ticket_);  // its queued job would only find it taken
  auto borrowed = self->backend_->borrow_thread();  // the caller's CUDA context comes back afterwards
  Job job;  // never yields (it would keep the caller waiting longer), so never outlives this call
  (void)self->work_on(job, /*may_yield=*/false);
  self->end_job(job, CallbacksOn::here);
  return true;
}

void RequestState::wait() const {
  if (ThreadPool::on_worker_thread()) {
    // Never block a worker: run queued jobs (perhaps this very request's) while waiting.
    for (;;) {
      if (done()) return;
      if (shared_pool().help_one()) continue;
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait_for(lock, std::chrono::microseconds(200),
                        [this] { return done_.load(std::memory_order_relaxed); });
    }
  }
  run_here_if_unclaimed();
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return done_.load(std::memory_order_relaxed); });
}

bool RequestState::wait_for(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (ThreadPool::on_worker_thread()) {
    // As wait(): a worker blocked here could be the one the request's jobs are queued behind.
    for (;;) {
      if (done()) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      if (shared_pool().help_one()) continue;
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait_for(lock, std::chrono::microseconds(200),
                        [this] { return done_.load(std::memory_order_relaxed); });
    }
  }
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

void RequestState::then(Callback callback, bool hurry) {
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_.load(std::memory_order_relaxed)) {
      callbacks_.push_back(std::move(callback));
      queued = true;
    }
  }
  if (queued) {
    if (hurry) expedite();
    return;
  }
  callback(outcome());
}

}  // namespace ferry::detail
