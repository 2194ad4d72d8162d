// Files that change size between open and read, or during a read: a read covers the file as it was
// when the request began, a file that shrinks under a read fails it, and no byte past a successful
// read's count is ever written.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "fault/fault_test.hpp"
#include "support/status_matchers.hpp"

namespace ferry {
namespace {

using testing::SentinelBuffer;
using testing::Op;
using testing::Rule;
using testing::ScriptedSyscalls;
using testing::StatusIs;
using FileSizeChange = testing::FaultTest;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST_F(FileSizeChange, TruncatedBetweenOpenAndReadReturnsWhatIsLeft) {
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    SCOPED_TRACE(direct_io_name(policy));
    auto path = testing::write_pattern_file(dir_ / "t.bin", 6 * kTask);
    auto file = File::open(path, "r", fault_config(policy));
    ASSERT_TRUE(file.ok());
    const std::uint64_t now = 2 * kTask + 1000;
    std::filesystem::resize_file(path, now);
    SentinelBuffer buf(6 * kTask);
    auto r = file->pread(buf.data(), 6 * kTask, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, now);
    EXPECT_TRUE(buf.holds(0, now));
    EXPECT_EQ(*file->size(), now);
  }
}

TEST_F(FileSizeChange, ExtendedBetweenOpenAndReadReturnsTheNewBytes) {
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    SCOPED_TRACE(direct_io_name(policy));
    auto path = testing::write_pattern_file(dir_ / "e.bin", kTask + 10);
    auto file = File::open(path, "r", fault_config(policy));
    ASSERT_TRUE(file.ok());
    testing::write_pattern_file(path, 5 * kTask + 3);
    SentinelBuffer buf(6 * kTask);
    auto r = file->pread(buf.data(), 6 * kTask, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, 5 * kTask + 3);
    EXPECT_TRUE(buf.holds(0, 5 * kTask + 3));
  }
}

// A file that shrinks under a parallel read cannot give a count that no byte past was written at (tasks
// after the new end may have finished first), so the read fails, naming where the file ended.
TEST_F(FileSizeChange, TruncatedDuringARequestFailsNamingWhereTheFileEnded) {
  auto path = testing::write_pattern_file(dir_ / "t.bin", 6 * kTask);
  // One thread, tasks in order: just before task 2 reads, the file shrinks to 1.5 tasks.
  sys_.add(Rule::on(Op::pread).covering(2 * kTask).limit(1).runs_first(
      [path] { std::filesystem::resize_file(path, kTask + kTask / 2); }));
  auto file = open(path, "r", fault_config(DirectIo::off, 1));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(6 * kTask);
  auto r = file->pread(buf.data(), 6 * kTask, 0).get();
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::io_error));
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error,
                          AllOf(HasSubstr("ended at offset 131072 while it was being read"),
                                HasSubstr(std::to_string(6 * kTask) + " bytes when the read began"))));
  EXPECT_EQ(r.status().path(), path);
}

TEST_F(FileSizeChange, TruncatedDuringDirectReadsFails) {
  auto path = testing::write_pattern_file(dir_ / "t.bin", 6 * kTask);
  const std::uint64_t now = kTask + 1000;
  sys_.add(Rule::on(Op::pread).only_direct().limit(1).runs_first([path, now] { std::filesystem::resize_file(path, now); }));
  auto file = open(path, "r", fault_config(DirectIo::on, 1));
  ASSERT_TRUE(file.ok());
  if (!file->direct_io_available()) GTEST_SKIP() << file->direct_io_note();
  SentinelBuffer buf(6 * kTask);
  auto r = file->pread(buf.data(), 6 * kTask, 0).get();
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error, HasSubstr("shrank during the read")));
}

// The host route: the file truncated while later tasks had already read. Before issue 9, such a read
// returned success with bytes past its count written; now it is an error, and a read that does succeed
// never has a byte past its count changed.
TEST_F(FileSizeChange, TruncatedWhileOtherTasksRunNeverSucceedsWithBytesPastTheCount) {
  for (int round = 0; round < 20; ++round) {
    auto path = testing::write_pattern_file(dir_ / "r.bin", 16 * kTask);
    ScriptedSyscalls sys;
    const std::uint64_t cut = (round % 15 + 1) * kTask - 7;
    sys.add(Rule::on(Op::pread).nth_call(3 + round % 5).limit(1).runs_first(
        [path, cut] { std::filesystem::resize_file(path, cut); }));
    auto file = open(path, "r", fault_config(DirectIo::off, 4), &sys);
    ASSERT_TRUE(file.ok());
    SentinelBuffer buf(16 * kTask);
    auto r = file->pread(buf.data(), 16 * kTask, 0).get();
    if (r.ok()) {
      EXPECT_TRUE(buf.holds(0, r->bytes)) << "round " << round;
    } else {
      EXPECT_THAT(r, StatusIs(ErrorCode::io_error, HasSubstr("shrank during the read"))) << "round " << round;
    }
  }
}

// A file growing during a request is read up to the size it had when the request began: nothing past
// the count is written, whatever a task sees.
TEST_F(FileSizeChange, GrowingDuringARequestIsReadToItsSizeAtTheStart) {
  auto path = testing::write_pattern_file(dir_ / "g.bin", 3 * kTask + 11);
  sys_.add(Rule::on(Op::pread).nth_call(1).limit(1).runs_first([path] {
    // Appended, never rewritten: a rewrite would shrink the file for a moment (and fail the read).
    std::ofstream out(path, std::ios::binary | std::ios::app);
    auto more = testing::pattern(3 * kTask + 11, 3 * kTask - 11);
    out.write(reinterpret_cast<const char*>(more.data()), static_cast<std::streamsize>(more.size()));
  }));
  auto file = open(path, "r", fault_config(DirectIo::off, 4));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(6 * kTask);
  auto r = file->pread(buf.data(), 6 * kTask, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 3 * kTask + 11);
  EXPECT_TRUE(buf.holds(0, 3 * kTask + 11));
}

// The tail of a file that ends inside an O_DIRECT block is never read with O_DIRECT (the kernel would
// fill the whole block): every byte after the count stays as it was.
TEST_F(FileSizeChange, ReadAtTheEndOfTheFileWritesNothingPastTheCountOnEveryPolicy) {
  const std::uint64_t size = 5 * kTask + 1000;
  auto path = testing::write_pattern_file(dir_ / "end.bin", size);
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    SCOPED_TRACE(direct_io_name(policy));
    auto file = File::open(path, "r", fault_config(policy));
    ASSERT_TRUE(file.ok());
    for (std::uint64_t offset : {std::uint64_t{0}, size - 1000, size - 4096, size - kTask - 1, size, size + 5}) {
      SentinelBuffer buf(2 * kTask);
      auto r = file->pread(buf.data(), 2 * kTask, offset).get();
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      std::uint64_t want = offset >= size ? 0 : std::min<std::uint64_t>(2 * kTask, size - offset);
      EXPECT_EQ(r->bytes, want) << offset;
      for (std::uint64_t i = 0; i < 2 * kTask; ++i) {
        std::uint8_t expect = i < want ? testing::pattern_byte(offset + i) : SentinelBuffer::kSentinel;
        ASSERT_EQ(buf.data()[i], expect) << "offset " << offset << " byte " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ferry
