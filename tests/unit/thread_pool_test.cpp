// ThreadPool: growing (on demand, up to a limit), jobs with a grace period, expedited and withdrawn jobs, jobs of a function
// and its object, running jobs, helping from the calling thread, draining on destruction.
#include "engine/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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

TEST(ThreadPool, GrowsWhileJobsWaitForAWorkerUpToTheLimit) {
  ThreadPool pool;
  std::latch all_running(4), release(1);
  for (int i = 0; i < 4; ++i) {
    pool.submit([&] {
      all_running.count_down();
      release.wait();
    }, /*grow_to=*/4);
  }
  all_running.wait();  // four jobs at once: the pool grew to four workers (with one, this never returns)
  EXPECT_EQ(pool.workers(), 4u);
  pool.submit([] {}, /*grow_to=*/4);  // a fifth waits: the limit is four
  EXPECT_EQ(pool.workers(), 4u);
  release.count_down();
}

TEST(ThreadPool, AnIdleWorkerTakesTheNextJobWithoutGrowing) {
  ThreadPool pool;
  for (int i = 0; i < 200; ++i) {
    std::latch ran(1);
    pool.submit([&] { ran.count_down(); }, /*grow_to=*/8);
    ran.wait();  // one job at a time: the one worker is idle again by the next submit (or soon after)
  }
  EXPECT_LE(pool.workers(), 2u) << "jobs one at a time need one worker (two if one was still finishing)";
}

// The grace period: workers leave the job alone for that long, and then run it with nobody asking.
TEST(ThreadPool, AJobInItsGracePeriodWaitsForItsTimeThenAWorkerRunsIt) {
  using namespace std::chrono;
  ThreadPool pool;
  pool.ensure_workers(2);
  std::atomic<bool> ran{false}, on_worker{false};
  const auto submitted = steady_clock::now();
  pool.submit([&] {
    on_worker = ThreadPool::on_worker_thread();
    ran = true;
  }, 0, milliseconds(300));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(ran.load()) << "a worker took the job inside its grace period";
  while (!ran.load() && steady_clock::now() - submitted < seconds(20)) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_TRUE(ran.load()) << "nobody ran the job after its grace period";
  EXPECT_GE(steady_clock::now() - submitted, milliseconds(300));
  EXPECT_TRUE(on_worker.load());
}

TEST(ThreadPool, AJobInItsGracePeriodHoldsNoOtherJobBack) {
  using namespace std::chrono;
  ThreadPool pool;
  pool.ensure_workers(1);
  std::latch later(1), now(1);
  pool.submit([&] { later.count_down(); }, 0, seconds(2));
  const auto submitted = steady_clock::now();
  pool.submit([&] { now.count_down(); });
  now.wait();
  EXPECT_LT(steady_clock::now() - submitted, seconds(2)) << "the ready job waited behind the waiting one";
  later.wait();
}

TEST(ThreadPool, AnExpeditedJobIsTakenAtOnce) {
  using namespace std::chrono;
  ThreadPool pool;
  pool.ensure_workers(1);
  std::latch ran(1);
  const auto submitted = steady_clock::now();
  const std::uint64_t ticket = pool.submit([&] { ran.count_down(); }, 0, seconds(30));
  pool.expedite(ticket);
  pool.expedite(ticket);  // twice, or after it ran: nothing happens
  ran.wait();
  EXPECT_LT(steady_clock::now() - submitted, seconds(20)) << "the job waited out its grace period";
  pool.expedite(ticket);
}

// Workers look only at the first of the jobs in their grace period (they fall due in the order they came);
// each still runs once its own time has come, and none earlier.
TEST(ThreadPool, JobsInTheirGracePeriodEachRunWhenTheirTimeComes) {
  using namespace std::chrono;
  ThreadPool pool;
  pool.ensure_workers(3);
  constexpr int kJobs = 20;
  std::vector<steady_clock::time_point> submitted(kJobs);
  std::vector<std::atomic<std::int64_t>> ran_after_ns(kJobs);
  std::latch all(kJobs);
  for (int i = 0; i < kJobs; ++i) {
    submitted[i] = steady_clock::now();
    pool.submit([&, i] {
      ran_after_ns[i] = duration_cast<nanoseconds>(steady_clock::now() - submitted[i]).count();
      all.count_down();
    }, 0, milliseconds(20));
    std::this_thread::sleep_for(milliseconds(1));
  }
  all.wait();
  for (int i = 0; i < kJobs; ++i) {
    EXPECT_GE(ran_after_ns[i].load(), duration_cast<nanoseconds>(milliseconds(20)).count()) << "job " << i << " ran early";
    EXPECT_LT(ran_after_ns[i].load(), duration_cast<nanoseconds>(seconds(10)).count()) << "job " << i << " waited long";
  }
}

// An expedited job between jobs still in their grace period is ready at once: found behind them.
TEST(ThreadPool, AnExpeditedJobBehindWaitingOnesIsTakenAtOnce) {
  using namespace std::chrono;
  std::atomic<bool> first_ran{false};
  std::latch middle_ran(1), rest_ran(2);  // before the pool: its jobs may not outlive them
  ThreadPool pool;
  pool.ensure_workers(1);
  const std::uint64_t first = pool.submit([&] {
    first_ran = true;
    rest_ran.count_down();
  }, 0, seconds(30));
  const std::uint64_t middle = pool.submit([&] { middle_ran.count_down(); }, 0, seconds(30));
  const std::uint64_t last = pool.submit([&] { rest_ran.count_down(); }, 0, seconds(30));
  const auto expedited = steady_clock::now();
  pool.expedite(middle);
  middle_ran.wait();
  EXPECT_LT(steady_clock::now() - expedited, seconds(20)) << "the expedited job waited for the first one's time";
  EXPECT_FALSE(first_ran.load()) << "a job still in its grace period ran";
  pool.expedite(first);
  pool.expedite(last);
  rest_ran.wait();
}

TEST(ThreadPool, AWithdrawnJobNeverRunsAndHelpersTakeWaitingJobs) {
  using namespace std::chrono;
  ThreadPool pool;  // no workers: only help_one runs anything
  std::atomic<int> ran{0};
  const std::uint64_t withdrawn = pool.submit([&] { ran += 100; }, 0, seconds(10));
  pool.submit([&] { ran += 1; }, 0, seconds(10));
  EXPECT_TRUE(pool.withdraw(withdrawn));
  EXPECT_FALSE(pool.withdraw(withdrawn)) << "twice, or after it ran: nothing happens";
  EXPECT_EQ(pool.queued_with_grace(), 1u);
  EXPECT_TRUE(pool.help_one()) << "a helper takes a job in its grace period";
  EXPECT_FALSE(pool.help_one());
  EXPECT_EQ(ran.load(), 1);
}

// A job given as a function and its object: the pool keeps the object alive while the job waits, passes it
// to the function, and lets it go once the job has run (or was withdrawn).
TEST(ThreadPool, AJobOfAFunctionAndItsObjectKeepsTheObjectUntilItHasRun) {
  using namespace std::chrono;
  ThreadPool pool;  // no workers: only help_one runs anything
  auto add_one = [](void* counter) { ++*static_cast<int*>(counter); };
  auto counter = std::make_shared<int>(0);
  std::weak_ptr<int> watch = counter;
  pool.submit(PoolJob(add_one, counter), 0, seconds(10));
  auto other = std::make_shared<int>(0);
  std::weak_ptr<int> watch_other = other;
  const std::uint64_t withdrawn = pool.submit(PoolJob(add_one, other), 0, seconds(10));
  counter.reset();
  other.reset();
  EXPECT_FALSE(watch.expired()) << "the queued job lost its object";
  pool.withdraw(withdrawn);
  EXPECT_TRUE(watch_other.expired()) << "a withdrawn job kept its object";
  auto seen = watch.lock();
  ASSERT_TRUE(pool.help_one());
  EXPECT_EQ(*seen, 1) << "the function did not get its object";
  seen.reset();
  EXPECT_TRUE(watch.expired()) << "the job kept its object after it ran";
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
