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

#include "fault/fault_test.hpp"
#include "support/status_matchers.hpp"

using ::testing::HasSubstr;

namespace ferry {
namespace {

using testing::Op;
using testing::Rule;
using testing::StatusIs;
using Clock = std::chrono::steady_clock;
using FirstError = testing::FaultTest;

constexpr std::uint64_t kTasks = 32;

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

TEST_F(FirstError, ReadFailsWithTheErrorAndNoTaskTouchesTheBufferAfterwards) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", kTasks * kTask);
  sys_.add(Rule::on(Op::pread).covering(5 * kTask).sleeps(std::chrono::milliseconds(5)).fail(EIO));
  sys_.add(Rule::on(Op::pread).sleeps(std::chrono::milliseconds(30)));
  auto file = open(path, "r", fault_config(DirectIo::off, 4));
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
  auto preads = sys_.calls(Op::pread);
  for (const auto& c : preads) {
    EXPECT_LE(c.ended, completed) << "pread at offset " << c.offset << " still ran after completion";
  }
  EXPECT_LT(preads.size(), kTasks) << "tasks after the failure must not start";
  // Nothing starts afterwards either.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(sys_.calls(Op::pread).size(), preads.size());
}

TEST_F(FirstError, WriteFailsWithNoSpaceAndNoWriteRunsAfterCompletion) {
  auto path = (dir_ / "w.bin").string();
  sys_.add(Rule::on(Op::pwrite).covering(3 * kTask).fail(ENOSPC));
  sys_.add(Rule::on(Op::pwrite).sleeps(std::chrono::milliseconds(20)));
  auto file = open(path, "w", fault_config(DirectIo::off, 4));
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(kTasks * kTask, 1);
  Future f = file->pwrite(buf.data(), buf.size(), 0);
  CompletionClock done;
  done.arm(f);
  auto r = f.get();
  ASSERT_THAT(r, StatusIs(ErrorCode::no_space, HasSubstr("offset " + std::to_string(3 * kTask))));
  EXPECT_EQ(r.status().sys_errno(), ENOSPC);
  Clock::time_point completed = done.get();
  auto writes = sys_.calls(Op::pwrite);
  for (const auto& c : writes) EXPECT_LE(c.ended, completed);
  EXPECT_LT(writes.size(), kTasks);
}

TEST_F(FirstError, TheEarliestFailureWinsOverALaterOne) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", 8 * kTask);
  sys_.add(Rule::on(Op::pread).covering(1 * kTask).fail(EIO));
  sys_.add(Rule::on(Op::pread).covering(2 * kTask).sleeps(std::chrono::milliseconds(30)).fail(ENOSPC));
  auto file = open(path, "r", fault_config(DirectIo::off, 4));
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(8 * kTask);
  auto r = file->pread(buf.data(), buf.size(), 0).get();
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error, HasSubstr("offset 65536")));
  EXPECT_EQ(r.status().sys_errno(), EIO);
}

TEST_F(FirstError, FailedRequestLeavesTheFileUsable) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", 4 * kTask);
  sys_.add(Rule::on(Op::pread).covering(kTask).fail(EIO).limit(1));
  auto file = open(path, "r", fault_config(DirectIo::off, 2));
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(4 * kTask);
  ASSERT_THAT(file->pread(buf.data(), buf.size(), 0).get(), StatusIs(ferry::ErrorCode::io_error));
  auto r = file->pread(buf.data(), buf.size(), 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(buf, testing::pattern(0, 4 * kTask));
}

TEST_F(FirstError, FailedRequestStillCountsInTheFilesReport) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", 4 * kTask);
  sys_.add(Rule::on(Op::pread).covering(3 * kTask).fail(EIO).limit(1));
  auto file = open(path, "r", fault_config(DirectIo::off, 1));
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(4 * kTask);
  ASSERT_THAT(file->pread(buf.data(), buf.size(), 0).get(), StatusIs(ferry::ErrorCode::io_error));
  // One worker, in order: three tasks succeeded before the fourth failed; the trail keeps them.
  Report report = file->report();
  EXPECT_EQ(report.at(Route::host).ops, 3u) << report.summary();
  EXPECT_EQ(report.io.buffered_ops, 4u);
}

}  // namespace
}  // namespace ferry
