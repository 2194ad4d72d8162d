// ThreadPool: a FIFO of jobs (each ready at once or after a grace period) with workers grown on demand.
#include "engine/thread_pool.hpp"

#include <pthread.h>

#include <algorithm>
#include <optional>

#include "base/fork_guard.hpp"
#include "base/setup_ledger.hpp"

namespace ferry::detail {
namespace {
thread_local bool t_on_worker = false;  // the worker's identity: a thread of some ThreadPool
}  // namespace

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::ensure_workers(std::size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (threads_.size() < n) add_workers_locked(n - threads_.size());
}

void ThreadPool::add_workers_locked(std::size_t n) {
  SetupTimer timer(SetupStep::threads);
  timer.set(n, 0);
  for (std::size_t i = 0; i < n; ++i) threads_.emplace_back([this] { worker_loop(); });
}

std::size_t ThreadPool::workers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

std::size_t ThreadPool::queued_with_grace() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_out_grace_;
}

std::uint64_t ThreadPool::submitted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_ticket_;  // one a job
}

std::uint64_t ThreadPool::submit(PoolJob job, std::size_t grow_to, std::chrono::microseconds grace) {
  bool wake = true;
  std::uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const Clock::time_point now = Clock::now();
    const Clock::time_point ready_at = grace.count() > 0 ? now + grace : Clock::time_point::min();
    if (grace.count() > 0) {
      last_grace_submit_ = now;
      last_grace_ = grace;
      ++waiting_out_grace_;
    }
    ticket = ++last_ticket_;
    queue_.push_back(Entry{std::move(job), ready_at, ticket, grow_to});
    if (queue_.size() > idle_ && threads_.size() < grow_to) add_workers_locked(1);
    // A job that may wait needs no wake while a worker watches the clock: that worker takes it in time
    // (every later job's time is later, the grace being the same). No wake is the point: a wake is a
    // system call on the submitting thread, most of a small request's cost.
    wake = grace.count() == 0 || !watching_;
  }
  if (wake) wake_.notify_one();
  return ticket;
}

bool ThreadPool::withdraw(std::uint64_t ticket) {
  std::optional<PoolJob> job;  // destroyed outside the lock: it may hold the last reference to its owner
  std::lock_guard<std::mutex> lock(mutex_);
  // From the back: the job withdrawn is most often the newest.
  auto it = std::find_if(queue_.rbegin(), queue_.rend(), [&](const Entry& e) { return e.ticket == ticket; });
  if (it == queue_.rend()) return false;
  job = take_locked(std::next(it).base());
  return true;
}

void ThreadPool::expedite(std::uint64_t ticket) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(queue_.rbegin(), queue_.rend(), [&](const Entry& e) { return e.ticket == ticket; });
    if (it == queue_.rend() || !it->in_grace()) return;
    it->ready_at = Clock::time_point::min();
    --waiting_out_grace_;
  }
  wake_.notify_one();
}

bool ThreadPool::help_one() {
  std::optional<PoolJob> job;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return false;  // a helper takes any job, ready or not: it waits for progress
    job.emplace(take_locked(queue_.begin()));
  }
  (*job)();
  return true;
}

bool ThreadPool::on_worker_thread() { return t_on_worker; }

PoolJob ThreadPool::take_locked(std::deque<Entry>::iterator it) {
  if (it->in_grace()) --waiting_out_grace_;
  PoolJob job = std::move(it->job);
  queue_.erase(it);
  return job;
}

std::deque<ThreadPool::Entry>::iterator ThreadPool::first_ready_locked(Clock::time_point now) {
  if (stopping_) return queue_.begin();
  // Jobs in their grace period fall due in the order they came (one grace period for all): while every
  // queued job is in it, only the first can be due (measured no faster than a scan on the H200 machine,
  // 0.99-1.08x; kept as the lesser work under the lock every request takes).
  if (waiting_out_grace_ == queue_.size()) {
    return !queue_.empty() && queue_.front().ready_at <= now ? queue_.begin() : queue_.end();
  }
  return std::find_if(queue_.begin(), queue_.end(), [&](const Entry& e) { return e.ready_at <= now; });
}

void ThreadPool::worker_loop() {
  t_on_worker = true;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    const Clock::time_point now = Clock::now();
    auto ready = first_ready_locked(now);
    if (stopping_ && queue_.empty()) return;
    if (ready != queue_.end()) {
      {
        PoolJob job = take_locked(ready);
        // Jobs left behind get a worker before this one runs, so that a long job here holds none of them back:
        // jobs in their grace period that nobody watches (this worker may have been the watcher), and ready
        // jobs, whose submit()'s wake may have reached the watcher, which then took a job whose grace had ended
        // instead. Without this, a ready job waited beside an idle worker (or, with none idle, for a worker
        // that was never added) until some worker came back: for good where the running jobs waited for it.
        const bool left = (waiting_out_grace_ > 0 && !watching_) || queue_.size() > waiting_out_grace_;
        const bool hand_on = left && idle_ > 0;
        if (left && idle_ == 0) {
          std::size_t grow_to = 0;
          for (const Entry& e : queue_) grow_to = std::max(grow_to, e.grow_to);
          if (threads_.size() < grow_to) add_workers_locked(1);
        }
        lock.unlock();
        if (hand_on) wake_.notify_one();
        job();
      }  // the job, and the last reference to what it worked on, go before the lock is taken again
      lock.lock();
      continue;
    }
    ++idle_;
    // With jobs in their grace period, or shortly after the last one came, one worker watches the clock:
    // until the first one's time, or (lingering) a grace period at a time. A steady stream of one-at-a-time
    // requests then never needs a wake from its submitter.
    const bool lingering = now < last_grace_submit_ + kWatchLinger;
    if (watching_ || (queue_.empty() && !lingering)) {
      wake_.wait(lock);
    } else {
      watching_ = true;
      // Nothing is ready, so every queued job is in its grace period, and the first is due first.
      const Clock::time_point until = queue_.empty() ? now + last_grace_ : queue_.front().ready_at;
      wake_.wait_until(lock, until);
      watching_ = false;
    }
    --idle_;
  }
}

namespace {

// The process's two pools. Leaked on purpose: workers may still be finishing detached requests during
// static destruction.
struct Pools {
  std::atomic<ThreadPool*> shared{new ThreadPool()};
  std::atomic<ThreadPool*> stream{new ThreadPool()};
};

// After fork() the child starts with new, empty pools (docs/engine.md, "After fork()"); the old ones are left
// alone: destroying them would join threads that do not exist there, and a worker may have held their lock.
constinit std::atomic<Pools*> g_pools{nullptr};

void renew_pools_in_child() {
  Pools* p = g_pools.load();
  if (p == nullptr) return;  // none yet: the child makes its own on first use
  p->shared.store(new ThreadPool());
  p->stream.store(new ThreadPool());
}

// Registered as the library loads, before any thread of it exists.
[[maybe_unused]] const int g_renew_registered = pthread_atfork(nullptr, nullptr, renew_pools_in_child);

Pools& pools() {
  return made_once(g_pools, [] { return new Pools(); });
}

}  // namespace

ThreadPool& shared_pool() { return *pools().shared.load(std::memory_order_acquire); }

ThreadPool& stream_pool() { return *pools().stream.load(std::memory_order_acquire); }

}  // namespace ferry::detail
