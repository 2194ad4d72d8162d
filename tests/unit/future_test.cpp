// Future: get/wait/wait_for/done/then, callbacks that issue and wait for further requests (no deadlock on
// a one-thread configuration), and futures dropped without get().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <unistd.h>
#include <thread>
#include <vector>

#include "ferry/ferry.hpp"
#include "engine/thread_pool.hpp"
#include "file/open_options.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

using ::testing::HasSubstr;

namespace ferry {
namespace {

constexpr std::uint64_t kTask = 64 * 1024;
constexpr auto kDeadlockGuard = std::chrono::seconds(20);

Config config(unsigned threads) {
  Config c;
  c.set_task_size(kTask).set_threads(threads);
  return c;
}

// Runs `body` on another thread and fails (instead of hanging) when it does not finish in time.
template <typename Body>
void finishes_in_time(Body body) {
  auto done = std::async(std::launch::async, body);
  ASSERT_EQ(done.wait_for(kDeadlockGuard), std::future_status::ready) << "deadlock: not done after 20 s";
  done.get();
}

// Runs `body` in a fresh process (a "threadsafe" death test re-executes this binary), so that Ferry's shared
// pool really has one worker: in this process earlier tests have grown it. SIGALRM ends a deadlocked child.
template <typename Body>
void in_fresh_process_with_one_worker(Body body) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::alarm(20);
        if (detail::shared_pool().workers() > 1) std::_Exit(3);
        body();
        std::_Exit(::testing::Test::HasFailure() ? 1 : (detail::shared_pool().workers() == 1 ? 0 : 2));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Future, EmptyFutureFailsCleanly) {
  Future f;
  EXPECT_FALSE(f.valid());
  EXPECT_FALSE(f.done());
  f.wait();
  EXPECT_TRUE(f.wait_for(std::chrono::milliseconds(1)));
  auto r = f.get();
  ASSERT_THAT(r, StatusIs(ErrorCode::failed_precondition));
  EXPECT_THAT(r.status().message(), HasSubstr("empty Future"));
}

TEST(Future, GetTwiceFailsTheSecondTime) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", kTask);
  auto file = File::open(path, "r", config(2));
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(kTask);
  Future f = file->pread(buf.data(), kTask, 0);
  EXPECT_TRUE(f.valid());
  ASSERT_TRUE(f.get().ok());
  EXPECT_FALSE(f.valid());
  auto again = f.get();
  ASSERT_THAT(again, StatusIs(ErrorCode::failed_precondition));
}

TEST(Future, WaitForTimesOutOnASlowRequestThenCompletes) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", kTask);
  testing::ScriptedSyscalls sys;
  sys.add(testing::Rule::on_io().sleeps(std::chrono::milliseconds(150)));
  auto file = detail::open_file(path, "r", config(1), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(kTask);
  Future f = file->pread(buf.data(), kTask, 0);
  EXPECT_FALSE(f.wait_for(std::chrono::milliseconds(10)));
  EXPECT_FALSE(f.done());
  EXPECT_TRUE(f.wait_for(kDeadlockGuard));
  EXPECT_TRUE(f.done());
  f.wait();
  auto r = f.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(buf, testing::pattern(0, kTask));
}

TEST(Future, ThenAfterCompletionRunsAtOnceOnTheCallingThread) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", kTask);
  auto file = File::open(path, "r", config(2));
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(kTask);
  Future f = file->pread(buf.data(), kTask, 0);
  f.wait();
  std::thread::id ran_on;
  std::uint64_t bytes = 0;
  f.then([&](const Result<Transfer>& r) {
    ran_on = std::this_thread::get_id();
    bytes = r.ok() ? r->bytes : 0;
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(bytes, kTask);
}

TEST(Future, EveryThenCallbackRunsOnceWithTheResult) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 8 * kTask);
  testing::ScriptedSyscalls sys;
  sys.add(testing::Rule::on_io().sleeps(std::chrono::milliseconds(5)));
  auto file = detail::open_file(path, "r", config(4), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(8 * kTask);
  Future f = file->pread(buf.data(), buf.size(), 0);
  std::atomic<int> calls{0};
  std::atomic<std::uint64_t> seen{0};
  for (int i = 0; i < 5; ++i) {
    f.then([&](const Result<Transfer>& r) {
      ++calls;
      if (r.ok()) seen += r->bytes;
    });
  }
  ASSERT_TRUE(f.get().ok());
  auto deadline = std::chrono::steady_clock::now() + kDeadlockGuard;
  while (calls.load() < 5 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_EQ(calls.load(), 5);
  EXPECT_EQ(seen.load(), 5 * 8 * kTask);
}

TEST(Future, ThenOnAFailedRequestSeesTheError) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", kTask);
  auto file = File::open(path, "r", config(2));
  ASSERT_TRUE(file.ok());
  char buf[4];
  Future f = file->pwrite(buf, sizeof buf, 0);  // mode "r": fails before any I/O
  std::string message;
  f.then([&](const Result<Transfer>& r) { message = r.ok() ? "ok" : r.status().message(); });
  EXPECT_THAT(message, HasSubstr("reading only"));
}

TEST(Future, ReadIssuedFromACallbackWithOneThreadDoesNotDeadlock) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 8 * kTask);
  in_fresh_process_with_one_worker([&] {
    auto file = File::open(path, "r", config(1));
    ASSERT_TRUE(file.ok());
    std::vector<std::uint8_t> outer(4 * kTask), inner(4 * kTask);
    std::promise<Result<Transfer>> nested;
    Future f = file->pread(outer.data(), outer.size(), 0);
    f.then([&](const Result<Transfer>& r) {
      ASSERT_TRUE(r.ok());
      // Runs on the only worker: this read and its wait must not need another one.
      nested.set_value(file->pread(inner.data(), inner.size(), 4 * kTask).get());
    });
    auto r = nested.get_future().get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, 4 * kTask);
    EXPECT_EQ(outer, testing::pattern(0, 4 * kTask));
    EXPECT_EQ(inner, testing::pattern(4 * kTask, 4 * kTask));
  });
}

TEST(Future, WaitForInsideACallbackWithOneThreadMakesProgress) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 4 * kTask);
  in_fresh_process_with_one_worker([&] {
    auto file = File::open(path, "r", config(1));
    ASSERT_TRUE(file.ok());
    std::vector<std::uint8_t> outer(kTask), inner(kTask);
    std::promise<bool> finished;
    Future f = file->pread(outer.data(), kTask, 0);
    f.then([&](const Result<Transfer>&) {
      Future nested = file->pread(inner.data(), kTask, kTask);
      finished.set_value(nested.wait_for(std::chrono::seconds(5)));
    });
    EXPECT_TRUE(finished.get_future().get()) << "wait_for on a worker must run queued jobs, like wait()";
    EXPECT_EQ(inner, testing::pattern(kTask, kTask));
  });
}

TEST(Future, NestedWaitsThreeDeepWithOneThread) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 6 * kTask);
  in_fresh_process_with_one_worker([&] {
    auto file = File::open(path, "r", config(1));
    ASSERT_TRUE(file.ok());
    std::vector<std::vector<std::uint8_t>> bufs(3, std::vector<std::uint8_t>(2 * kTask));
    std::promise<void> all_done;
    std::function<void(int)> level = [&](int depth) {
      Future f = file->pread(bufs[depth].data(), 2 * kTask, depth * 2 * kTask);
      if (depth == 2) {
        ASSERT_TRUE(f.get().ok());
        all_done.set_value();
        return;
      }
      f.then([&, depth](const Result<Transfer>& r) {
        ASSERT_TRUE(r.ok());
        level(depth + 1);
      });
    };
    level(0);
    all_done.get_future().get();
    for (int d = 0; d < 3; ++d) EXPECT_EQ(bufs[d], testing::pattern(d * 2 * kTask, 2 * kTask)) << d;
  });
}

TEST(Future, ManyCallbacksEachWaitingOnNestedReadsWithTwoThreads) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 16 * kTask);
  finishes_in_time([&] {
    auto file = File::open(path, "r", config(2));
    ASSERT_TRUE(file.ok());
    constexpr int kOuter = 8;
    std::vector<std::vector<std::uint8_t>> outer(kOuter, std::vector<std::uint8_t>(2 * kTask));
    std::vector<std::vector<std::uint8_t>> inner(kOuter, std::vector<std::uint8_t>(2 * kTask));
    std::atomic<int> ok{0};
    std::vector<Future> futures;
    for (int i = 0; i < kOuter; ++i) {
      futures.push_back(file->pread(outer[i].data(), 2 * kTask, i * 2 * kTask));
      futures.back().then([&, i](const Result<Transfer>&) {
        auto r = file->pread(inner[i].data(), 2 * kTask, (kOuter - 1 - i) * 2 * kTask).get();
        if (r.ok() && inner[i] == testing::pattern((kOuter - 1 - i) * 2 * kTask, 2 * kTask)) ++ok;
      });
    }
    for (auto& f : futures) ASSERT_TRUE(f.get().ok());
    auto deadline = std::chrono::steady_clock::now() + kDeadlockGuard;
    while (ok.load() < kOuter && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(ok.load(), kOuter);
  });
}

TEST(Future, DroppedFutureStillCompletesAndIsCounted) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 4 * kTask);
  auto file = File::open(path, "r", config(2));
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(4 * kTask);
  { Future dropped = file->pread(buf.data(), buf.size(), 0); }
  auto deadline = std::chrono::steady_clock::now() + kDeadlockGuard;
  while (file->report().total_ops() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(file->report().total_ops(), 4u);
  EXPECT_EQ(buf, testing::pattern(0, 4 * kTask));
}

TEST(Future, FileDestroyedBeforeGetStillDelivers) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 8 * kTask);
  std::vector<std::uint8_t> buf(8 * kTask);
  Future f;
  {
    auto file = File::open(path, "r", config(4));
    ASSERT_TRUE(file.ok());
    f = file->pread(buf.data(), buf.size(), 0);
  }
  auto r = f.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(buf, testing::pattern(0, 8 * kTask));
}

}  // namespace
}  // namespace ferry
