// ThreadPool: a plain FIFO of jobs with lazily grown workers.
#include "engine/thread_pool.hpp"

#include "base/setup_ledger.hpp"

namespace ferry::detail {
namespace {
thread_local bool t_on_worker = false;
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

void ThreadPool::submit(std::function<void()> job, std::size_t grow_to) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
    queued_.store(queue_.size(), std::memory_order_relaxed);
    if (queue_.size() > idle_ && threads_.size() < grow_to) add_workers_locked(1);
  }
  wake_.notify_one();
}

bool ThreadPool::help_one() {
  std::function<void()> job;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return false;
    job = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_relaxed);
  }
  job();
  return true;
}

bool ThreadPool::on_worker_thread() { return t_on_worker; }

void ThreadPool::worker_loop() {
  t_on_worker = true;
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++idle_;
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      queued_.store(queue_.size(), std::memory_order_relaxed);
    }
    job();
  }
}

ThreadPool& shared_pool() {
  // Leaked on purpose: workers may still be finishing detached requests during static destruction.
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

ThreadPool& stream_pool() {
  static ThreadPool* pool = new ThreadPool();  // leaked, as shared_pool()
  return *pool;
}

}  // namespace ferry::detail
