// ThreadPool: growing, running jobs, helping from the calling thread, draining on destruction.
#include "engine/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace ferry::detail {
namespace {

TEST(ThreadPool, GrowsButNeverShrinks) {
  ThreadPool pool;
  EXPECT_EQ(pool.workers(), 0u);
  pool.ensure_workers(3);
  EXPECT_EQ(pool.workers(), 3u);
  pool.ensure_workers(1);
  EXPECT_EQ(pool.workers(), 3u);
}

TEST(ThreadPool, RunsEverySubmittedJobOnAWorker) {
  std::atomic<int> ran{0}, on_worker{0};
  {
    ThreadPool pool;
    pool.ensure_workers(4);
    for (int i = 0; i < 1000; ++i) {
      pool.submit([&] {
        ++ran;
        if (ThreadPool::on_worker_thread()) ++on_worker;
      });
    }
  }  // the destructor drains the queue before joining
  EXPECT_EQ(ran.load(), 1000);
  EXPECT_EQ(on_worker.load(), 1000);
  EXPECT_FALSE(ThreadPool::on_worker_thread());
}

TEST(ThreadPool, HelpOneRunsAQueuedJobOnTheCallingThread) {
  ThreadPool pool;  // no workers: only help_one can run the job
  EXPECT_FALSE(pool.help_one());
  std::thread::id ran_on;
  pool.submit([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_TRUE(pool.help_one());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_FALSE(pool.help_one());
}

TEST(ThreadPool, SharedPoolIsOneObject) {
  EXPECT_EQ(&shared_pool(), &shared_pool());
}

TEST(ThreadPool, JobsMaySubmitJobs) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool;
    pool.ensure_workers(2);
    for (int i = 0; i < 10; ++i) {
      pool.submit([&] {
        ++ran;
        pool.submit([&] { ++ran; });
      });
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (ran.load() < 20 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  }
  EXPECT_EQ(ran.load(), 20);
}

}  // namespace
}  // namespace ferry::detail
