// Files that change size between open and read, or during a read: reads return what is there, and no
// byte that is not the file's lands in the buffer.
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
#include "support/test_files.hpp"

namespace ferry {
namespace {

using testing::Op;
using testing::Rule;
using testing::ScriptedSyscalls;

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

TEST(FileSizeChange, TruncatedDuringARequestStopsAtTheTaskThatSawTheEnd) {
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
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Tasks 0 and 1 were read before the truncation; task 2 found the end.
  EXPECT_EQ(r->bytes, 2 * kTask);
  EXPECT_TRUE(buf.holds(2 * kTask));
}

TEST(FileSizeChange, TruncatedDuringDirectReadsTouchesNothingPastTheTaskThatMetTheEnd) {
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
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, now);
  // Known limitation (reported, not fixed): an O_DIRECT read that meets an end of file moved under it
  // (the size was checked at submission) has the rest of its range zero-filled by the kernel, past the
  // bytes it returns. Everything before is the file's; nothing past that task's range is touched.
  const std::uint64_t task_end = 2 * kTask;
  for (std::uint64_t i = 0; i < 6 * kTask; ++i) {
    std::uint8_t b = buf.data()[i];
    if (i < now) {
      ASSERT_EQ(b, testing::pattern_byte(i)) << i;
    } else if (i < task_end) {
      ASSERT_TRUE(b == kSentinel || b == 0) << "byte " << i << " in the task holding the end is " << int(b);
    } else {
      ASSERT_EQ(b, kSentinel) << "byte " << i << " past the task holding the end was written";
    }
  }
}

TEST(FileSizeChange, EndSeenByOneTaskWhileALaterTaskSeesDataNeverYieldsForeignBytes) {
  // A file growing during a request: task 2 sees the end (scripted), task 3 then reads real data. The
  // request reports 2 tasks of bytes; whatever lies past them in the buffer must be the file's own bytes
  // or untouched, never anything else.
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "g.bin", 6 * kTask);
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pread).covering(2 * kTask).returns_eof());
  auto file = detail::open_file(path, "r", config(DirectIo::off, 4), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  Buffer buf(6 * kTask);
  auto r = file->pread(buf.data(), 6 * kTask, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 2 * kTask);
  for (std::uint64_t i = 0; i < 6 * kTask; ++i) {
    std::uint8_t b = buf.data()[i];
    if (i < 2 * kTask) {
      ASSERT_EQ(b, testing::pattern_byte(i)) << i;
    } else {
      ASSERT_TRUE(b == kSentinel || b == testing::pattern_byte(i)) << "foreign byte at " << i;
    }
  }
}

}  // namespace
}  // namespace ferry
