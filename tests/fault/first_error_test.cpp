// "The first error of any task fails the future; no task keeps writing into a buffer after its future has
// failed." Scripted EIO/ENOSPC on one task while the others are slow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "ferry/ferry.hpp"
#include "file/open_options.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ::testing::HasSubstr;

namespace ferry {
namespace {

using testing::Op;
using testing::Rule;
using testing::ScriptedSyscalls;
using testing::StatusIs;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kTask = 64 * 1024;
constexpr std::uint64_t kTasks = 32;

Config config(unsigned threads) {
  Config c;
  c.set_task_size(kTask).set_threads(threads).set_direct_io(DirectIo::off);
  return c;
}

std::uint64_t checksum(const std::vector<std::uint8_t>& v) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint8_t b : v) h = (h ^ b) * 1099511628211ull;
  return h;
}

// Completion time as seen by a then() callback, which runs when the request is done.
// get() may return before then() callbacks have run, so get() here waits for the callback.
struct CompletionClock {
  std::mutex m;
  std::condition_variable cv;
  std::optional<Clock::time_point> at;
  void arm(Future& f) {
    f.then([this](const Result<Transfer>&) {
      std::lock_guard<std::mutex> lock(m);
      at = Clock::now();
      cv.notify_all();
    });
  }
  Clock::time_point get() {
    std::unique_lock<std::mutex> lock(m);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [this] { return at.has_value(); }))
        << "then() callback never ran";
    return at.value_or(Clock::time_point{});
  }
};

TEST(FirstError, ReadFailsWithTheErrorAndNoTaskTouchesTheBufferAfterwards) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", kTasks * kTask);
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pread).covering(5 * kTask).sleeps(std::chrono::milliseconds(5)).fail(EIO));
  sys.add(Rule::on(Op::pread).sleeps(std::chrono::milliseconds(30)));
  auto file = detail::open_file(path, "r", config(4), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(kTasks * kTask, 0);
  Future f = file->pread(buf.data(), buf.size(), 0);
  CompletionClock done;
  done.arm(f);
  auto r = f.get();
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error, HasSubstr("offset " + std::to_string(5 * kTask))));
  EXPECT_THAT(r.status().to_string(), HasSubstr("EIO"));

  std::uint64_t before = checksum(buf);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // longer than any scripted pread
  EXPECT_EQ(checksum(buf), before) << "a task wrote into the buffer after the future failed";

  Clock::time_point completed = done.get();
  auto preads = sys.calls(Op::pread);
  for (const auto& c : preads) {
    EXPECT_LE(c.ended, completed) << "pread at offset " << c.offset << " still ran after completion";
  }
  EXPECT_LT(preads.size(), kTasks) << "tasks after the failure must not start";
  // Nothing starts afterwards either.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(sys.calls(Op::pread).size(), preads.size());
}

TEST(FirstError, WriteFailsWithNoSpaceAndNoWriteRunsAfterCompletion) {
  auto dir = testing::test_dir();
  auto path = (dir / "w.bin").string();
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pwrite).covering(3 * kTask).fail(ENOSPC));
  sys.add(Rule::on(Op::pwrite).sleeps(std::chrono::milliseconds(20)));
  auto file = detail::open_file(path, "w", config(4), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(kTasks * kTask, 1);
  Future f = file->pwrite(buf.data(), buf.size(), 0);
  CompletionClock done;
  done.arm(f);
  auto r = f.get();
  ASSERT_THAT(r, StatusIs(ErrorCode::no_space, HasSubstr("offset " + std::to_string(3 * kTask))));
  EXPECT_EQ(r.status().sys_errno(), ENOSPC);
  Clock::time_point completed = done.get();
  auto writes = sys.calls(Op::pwrite);
  for (const auto& c : writes) EXPECT_LE(c.ended, completed);
  EXPECT_LT(writes.size(), kTasks);
}

TEST(FirstError, TheEarliestFailureWinsOverALaterOne) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 8 * kTask);
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pread).covering(1 * kTask).fail(EIO));
  sys.add(Rule::on(Op::pread).covering(2 * kTask).sleeps(std::chrono::milliseconds(30)).fail(ENOSPC));
  auto file = detail::open_file(path, "r", config(4), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(8 * kTask);
  auto r = file->pread(buf.data(), buf.size(), 0).get();
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error, HasSubstr("offset 65536")));
  EXPECT_EQ(r.status().sys_errno(), EIO);
}

TEST(FirstError, FailedRequestLeavesTheFileUsable) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 4 * kTask);
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pread).covering(kTask).fail(EIO).limit(1));
  auto file = detail::open_file(path, "r", config(2), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(4 * kTask);
  ASSERT_FALSE(file->pread(buf.data(), buf.size(), 0).get().ok());
  auto r = file->pread(buf.data(), buf.size(), 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(buf, testing::pattern(0, 4 * kTask));
}

TEST(FirstError, FailedRequestStillCountsInTheFilesReport) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 4 * kTask);
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pread).covering(3 * kTask).fail(EIO).limit(1));
  auto file = detail::open_file(path, "r", config(1), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(4 * kTask);
  ASSERT_FALSE(file->pread(buf.data(), buf.size(), 0).get().ok());
  // One worker, in order: three tasks succeeded before the fourth failed; the trail keeps them.
  Report report = file->report();
  EXPECT_EQ(report.at(Route::host).ops, 3u) << report.summary();
  EXPECT_EQ(report.io.buffered_ops, 4u);
}

}  // namespace
}  // namespace ferry
