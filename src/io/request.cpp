// RequestState: jobs pulling tasks, first-error-wins, completion and waiting.
#include "io/request.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "io/thread_pool.hpp"
#include "platform/nvtx/nvtx.hpp"
#include "route/process_report.hpp"

namespace ferry::detail {

std::shared_ptr<RequestState> RequestState::start(std::vector<Task> tasks, std::shared_ptr<RouteBackend> backend,
                                                  unsigned threads, EndOfFileRule eof,
                                                  std::function<void(Report&)> on_complete, bool trace_tasks,
                                                  std::shared_ptr<std::atomic<bool>> stop) {
  auto state = std::make_shared<RequestState>();
  state->trace_tasks_ = trace_tasks;
  state->stop_ = std::move(stop);
  state->tasks_ = std::move(tasks);
  state->eof_ = std::move(eof);
  state->backend_ = std::move(backend);
  state->on_complete_ = std::move(on_complete);
  unsigned jobs = static_cast<unsigned>(std::min<std::size_t>(std::max(1u, threads), state->tasks_.size()));
  if (jobs == 0) {
    state->complete();
    return state;
  }
  state->self_ = state;
  state->active_jobs_ = jobs;
  ThreadPool& pool = shared_pool();
  pool.ensure_workers(jobs);  // a two-task read needs two workers, not `threads`
  for (unsigned j = 0; j < jobs; ++j) pool.submit([state] { state->run_job(); });
  return state;
}

std::shared_ptr<RequestState> RequestState::failed(Status status) {
  auto state = std::make_shared<RequestState>();
  state->first_error_ = std::move(status);
  state->failed_ = true;
  state->complete();
  return state;
}

std::shared_ptr<RequestState> RequestState::deferred() {
  auto state = std::make_shared<RequestState>();
  state->deferred_ = true;
  return state;
}

bool RequestState::try_begin() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || first_error_.code() == ErrorCode::cancelled) return false;
  begun_ = true;
  return true;
}

void RequestState::link(const std::shared_ptr<RequestState>& inner) {
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inner_ = inner;
    cancelled = first_error_.code() == ErrorCode::cancelled;
  }
  if (cancelled) inner->cancel();  // cancel() arrived between try_begin() and link()
}

void RequestState::complete_deferred(Result<Transfer> result) {
  std::vector<Callback> callbacks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;  // cancelled before it began: it ended then
    if (result.ok()) bytes_done_.store(result->bytes, std::memory_order_relaxed);
    result_ = result;
    done_ = true;
    inner_.reset();
    callbacks.swap(callbacks_);
  }
  done_cv_.notify_all();
  for (auto& cb : callbacks) cb(result);
}

std::uint64_t RequestState::bytes_done() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (inner_) return inner_->bytes_done();
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
  std::shared_ptr<RequestState> inner;
  bool end_now = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_ || !first_error_.ok()) return;
    first_error_ = Status(ErrorCode::cancelled, "the request was cancelled");
    failed_.store(true, std::memory_order_release);
    if (stop_) stop_->store(true, std::memory_order_release);
    inner = inner_;
    end_now = deferred_ && !begun_;  // nothing runs yet, and try_begin() will now refuse
  }
  if (inner) inner->cancel();
  if (end_now) {
    complete_deferred(Status(ErrorCode::cancelled, "the request was cancelled before its stream reached it"));
  }
}

Status RequestState::ended_early(const Task& t, std::uint64_t bytes) const {
  return Status(ErrorCode::io_error,
                fmt::format("\"{}\" ended at offset {} while it was being read, but it held {} bytes when the read "
                            "began: it shrank during the read, so the data read is not one version of the file "
                            "(bytes of the destination past that offset may have been written)",
                            eof_.path, t.file_offset + bytes, eof_.size_at_start),
                0, eof_.path);
}

void RequestState::run_job() {
  Report local;
  // A job of a request cancelled or failed before it began makes no worker (and pins nothing).
  if (!failed_.load(std::memory_order_acquire)) run_tasks(local);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    report_.merge(local);
  }
  if (active_jobs_.fetch_sub(1, std::memory_order_acq_rel) == 1) complete();
}

void RequestState::run_tasks(Report& local) {
  if (trace_tasks_) nvtx::push("ferry worker set-up");
  auto worker = backend_->make_worker();
  if (trace_tasks_) nvtx::pop();
  if (!worker.ok()) {
    record_error(worker.status());
    return;
  }
  // A worker whose source keeps several tasks in flight takes that many at once; the others take one.
  const std::size_t batch = std::max<std::size_t>(1, (*worker)->batch_size());
  std::vector<Result<std::uint64_t>> results(batch, Result<std::uint64_t>(std::uint64_t{0}));
  bool stop = false;
  while (!stop && !failed_.load(std::memory_order_acquire)) {
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
      results[0] = (*worker)->run(slice[0], local);
    } else {
      (*worker)->run_batch(slice, local, std::span(results.data(), slice.size()));
    }
    if (trace_tasks_) nvtx::pop();
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started);
    const auto ns_each = static_cast<std::uint64_t>(ns.count()) / slice.size();
    for (std::size_t i = 0; i < slice.size() && !stop; ++i) {
      const Task& t = slice[i];
      if (!results[i].ok()) {
        record_error(results[i].status());
        stop = true;
        break;
      }
      const std::uint64_t bytes = *results[i];
      const Decision& decision = backend_->decision_for(t);
      local.count(decision.route, decision.reason, decision.detail, bytes, ns_each);
      bytes_done_.fetch_add(bytes, std::memory_order_relaxed);
      if (bytes < t.length && !eof_.short_task_ends_request) {
        record_error(ended_early(t, bytes));
        stop = true;
      }
    }
  }
  if (trace_tasks_) nvtx::push("ferry worker finish");
  Status finished = (*worker)->finish(local);
  if (trace_tasks_) nvtx::pop();
  if (!finished.ok()) record_error(finished);
}

void RequestState::complete() {
  std::vector<Callback> callbacks;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status = first_error_;
    if (backend_) status = backend_->finish_request(report_, status);
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
  if (on_complete_) on_complete_(report_);
  add_to_process_report(report_);
  Result<Transfer> result = status;
  if (status.ok()) result = Transfer{bytes_done_.load(std::memory_order_relaxed), report_};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = result;
    done_ = true;
    callbacks.swap(callbacks_);
  }
  done_cv_.notify_all();
  for (auto& cb : callbacks) cb(result);
  // Drop the self-reference last: waiters and callbacks may hold their own references.
  std::shared_ptr<RequestState> keep;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    keep.swap(self_);
  }
}

bool RequestState::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void RequestState::wait() const {
  if (ThreadPool::on_worker_thread()) {
    // Never block a worker: run queued jobs (perhaps this very request's) while waiting.
    for (;;) {
      if (done()) return;
      if (shared_pool().help_one()) continue;
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait_for(lock, std::chrono::microseconds(200), [this] { return done_; });
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return done_; });
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
      done_cv_.wait_for(lock, std::chrono::microseconds(200), [this] { return done_; });
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  return done_cv_.wait_until(lock, deadline, [this] { return done_; });
}

Result<Transfer> RequestState::take_result() {
  wait();
  std::lock_guard<std::mutex> lock(mutex_);
  return *result_;
}

void RequestState::then(Callback callback) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(*result_);
}

}  // namespace ferry::detail
