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

#include "ferry/ferry.hpp"
#include "file/open_options.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

namespace ferry {
namespace {

using testing::Op;
using testing::Rule;
using testing::ScriptedSyscalls;
using testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::uint64_t kTask = 64 * 1024;
constexpr std::uint8_t kSentinel = 0x5A;

Config config(DirectIo policy, unsigned threads = 4) {
  Config c;
  c.set_task_size(kTask).set_threads(threads).set_direct_io(policy);
  return c;
}

struct Buffer {
  explicit Buffer(std::uint64_t n) : size(n) {
    p.reset(static_cast<std::uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096)));
    std::memset(p.get(), kSentinel, n);
  }
  std::uint8_t* data() { return p.get(); }
  // [0, got) is the pattern; the rest is still the sentinel.
  ::testing::AssertionResult holds(std::uint64_t got) const {
    for (std::uint64_t i = 0; i < size; ++i) {
      std::uint8_t want = i < got ? testing::pattern_byte(i) : kSentinel;
      if (p.get()[i] != want) {
        return ::testing::AssertionFailure() << "byte " << i << " is " << int(p.get()[i]) << ", expected "
                                             << int(want) << " (" << got << " bytes read)";
      }
    }
    return ::testing::AssertionSuccess();
  }
  struct Free {
    void operator()(std::uint8_t* q) const { std::free(q); }
  };
  std::unique_ptr<std::uint8_t, Free> p;
  std::uint64_t size;
};

TEST(FileSizeChange, TruncatedBetweenOpenAndReadReturnsWhatIsLeft) {
  auto dir = testing::test_dir();
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    SCOPED_TRACE(direct_io_name(policy));
    auto path = testing::write_pattern_file(dir / "t.bin", 6 * kTask);
    auto file = File::open(path, "r", config(policy));
    ASSERT_TRUE(file.ok());
    const std::uint64_t now = 2 * kTask + 1000;
    std::filesystem::resize_file(path, now);
    Buffer buf(6 * kTask);
    auto r = file->pread(buf.data(), 6 * kTask, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, now);
    EXPECT_TRUE(buf.holds(now));
    EXPECT_EQ(*file->size(), now);
  }
}

TEST(FileSizeChange, ExtendedBetweenOpenAndReadReturnsTheNewBytes) {
  auto dir = testing::test_dir();
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    SCOPED_TRACE(direct_io_name(policy));
    auto path = testing::write_pattern_file(dir / "e.bin", kTask + 10);
    auto file = File::open(path, "r", config(policy));
    ASSERT_TRUE(file.ok());
    testing::write_pattern_file(path, 5 * kTask + 3);
    Buffer buf(6 * kTask);
    auto r = file->pread(buf.data(), 6 * kTask, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, 5 * kTask + 3);
    EXPECT_TRUE(buf.holds(5 * kTask + 3));
  }
}

// A file that shrinks under a parallel read cannot give a count that no byte past was written at (tasks
// after the new end may have finished first), so the read fails, naming where the file ended.
TEST(FileSizeChange, TruncatedDuringARequestFailsNamingWhereTheFileEnded) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "t.bin", 6 * kTask);
  ScriptedSyscalls sys;
  // One thread, tasks in order: just before task 2 reads, the file shrinks to 1.5 tasks.
  sys.add(Rule::on(Op::pread).covering(2 * kTask).limit(1).runs_first(
      [path] { std::filesystem::resize_file(path, kTask + kTask / 2); }));
  auto file = detail::open_file(path, "r", config(DirectIo::off, 1), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  Buffer buf(6 * kTask);
  auto r = file->pread(buf.data(), 6 * kTask, 0).get();
  ASSERT_FALSE(r.ok());
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error,
                          AllOf(HasSubstr("ended at offset 131072 while it was being read"),
                                HasSubstr(std::to_string(6 * kTask) + " bytes when the read began"))));
  EXPECT_EQ(r.status().path(), path);
}

TEST(FileSizeChange, TruncatedDuringDirectReadsFails) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "t.bin", 6 * kTask);
  ScriptedSyscalls sys;
  const std::uint64_t now = kTask + 1000;
  sys.add(Rule::on(Op::pread).only_direct().limit(1).runs_first([path, now] { std::filesystem::resize_file(path, now); }));
  auto file = detail::open_file(path, "r", config(DirectIo::on, 1), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  if (!file->direct_io_available()) GTEST_SKIP() << file->direct_io_note();
  Buffer buf(6 * kTask);
  auto r = file->pread(buf.data(), 6 * kTask, 0).get();
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error, HasSubstr("shrank during the read")));
}

// The host route: the file truncated while later tasks had already read. Before issue 9, such a read
// returned success with bytes past its count written; now it is an error, and a read that does succeed
// never has a byte past its count changed.
TEST(FileSizeChange, TruncatedWhileOtherTasksRunNeverSucceedsWithBytesPastTheCount) {
  auto dir = testing::test_dir();
  for (int round = 0; round < 20; ++round) {
    auto path = testing::write_pattern_file(dir / "r.bin", 16 * kTask);
    ScriptedSyscalls sys;
    const std::uint64_t cut = (round % 15 + 1) * kTask - 7;
    sys.add(Rule::on(Op::pread).nth_call(3 + round % 5).limit(1).runs_first(
        [path, cut] { std::filesystem::resize_file(path, cut); }));
    auto file = detail::open_file(path, "r", config(DirectIo::off, 4), detail::OpenOptions{.syscalls = &sys});
    ASSERT_TRUE(file.ok());
    Buffer buf(16 * kTask);
    auto r = file->pread(buf.data(), 16 * kTask, 0).get();
    if (r.ok()) {
      EXPECT_TRUE(buf.holds(r->bytes)) << "round " << round;
    } else {
      EXPECT_THAT(r, StatusIs(ErrorCode::io_error, HasSubstr("shrank during the read"))) << "round " << round;
    }
  }
}

// A file growing during a request is read up to the size it had when the request began: nothing past
// the count is written, whatever a task sees.
TEST(FileSizeChange, GrowingDuringARequestIsReadToItsSizeAtTheStart) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "g.bin", 3 * kTask + 11);
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pread).nth_call(1).limit(1).runs_first([path] {
    // Appended, never rewritten: a rewrite would shrink the file for a moment (and fail the read).
    std::ofstream out(path, std::ios::binary | std::ios::app);
    auto more = testing::pattern(3 * kTask + 11, 3 * kTask - 11);
    out.write(reinterpret_cast<const char*>(more.data()), static_cast<std::streamsize>(more.size()));
  }));
  auto file = detail::open_file(path, "r", config(DirectIo::off, 4), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  Buffer buf(6 * kTask);
  auto r = file->pread(buf.data(), 6 * kTask, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 3 * kTask + 11);
  EXPECT_TRUE(buf.holds(3 * kTask + 11));
}

// The tail of a file that ends inside an O_DIRECT block is never read with O_DIRECT (the kernel would
// fill the whole block): every byte after the count stays as it was.
TEST(FileSizeChange, ReadAtTheEndOfTheFileWritesNothingPastTheCountOnEveryPolicy) {
  auto dir = testing::test_dir();
  const std::uint64_t size = 5 * kTask + 1000;
  auto path = testing::write_pattern_file(dir / "end.bin", size);
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    SCOPED_TRACE(direct_io_name(policy));
    auto file = File::open(path, "r", config(policy));
    ASSERT_TRUE(file.ok());
    for (std::uint64_t offset : {std::uint64_t{0}, size - 1000, size - 4096, size - kTask - 1, size, size + 5}) {
      Buffer buf(2 * kTask);
      auto r = file->pread(buf.data(), 2 * kTask, offset).get();
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      std::uint64_t want = offset >= size ? 0 : std::min<std::uint64_t>(2 * kTask, size - offset);
      EXPECT_EQ(r->bytes, want) << offset;
      for (std::uint64_t i = 0; i < 2 * kTask; ++i) {
        std::uint8_t expect = i < want ? testing::pattern_byte(offset + i) : kSentinel;
        ASSERT_EQ(buf.data()[i], expect) << "offset " << offset << " byte " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ferry
