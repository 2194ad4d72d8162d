// Issue 10 (no command destroys, leaks or hangs), the library's part: close() racing requests, offsets
// that wrap, a file replaced while it is opened, FIFOs, size-less files, cancellation.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "ferry/ferry.hpp"
#include "file/open_options.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using testing::Op;
using testing::Rule;
using testing::ScriptedSyscalls;
using testing::StatusIs;

constexpr std::uint64_t kTask = 64 * 1024;

Config config(unsigned threads = 4) {
  Config c;
  c.set_task_size(kTask).set_threads(threads).set_direct_io(DirectIo::off);
  return c;
}

// Closing a File while another thread's write ran freed the descriptor number; a file opened next got
// it, and the write's remaining tasks landed in that other file. close() now waits for the write.
TEST(Issue10, CloseDuringAWriteWaitsForItAndNeverTouchesTheNextFile) {
  auto dir = testing::test_dir();
  const std::uint64_t size = 32 * kTask;
  std::vector<std::uint8_t> data = testing::pattern(0, size);
  for (int round = 0; round < 5; ++round) {
    ScriptedSyscalls sys;
    sys.add(Rule::on(Op::pwrite).sleeps(std::chrono::milliseconds(2)));  // a write that takes a while
    auto written = dir / "written.bin";
    auto file = detail::open_file(written.string(), "w", config(2), detail::OpenOptions{.syscalls = &sys});
    ASSERT_TRUE(file.ok());
    std::atomic<bool> write_ok{false};
    std::thread writer([&] { write_ok = file->write(data.data(), size).ok(); });
    while (sys.count(Op::pwrite) == 0) std::this_thread::yield();
    ASSERT_TRUE(file->close().ok());
    // The descriptor numbers are free now: whatever opens next gets them.
    auto bystander = dir / "bystander.bin";
    testing::write_pattern_file(bystander, 4096);
    int fd = ::open(bystander.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    writer.join();
    ::close(fd);
    EXPECT_TRUE(write_ok.load()) << "close() returned before the write finished";
    EXPECT_EQ(testing::read_whole_file(written), data);
    EXPECT_EQ(testing::read_whole_file(bystander), testing::pattern(0, 4096)) << "round " << round;
  }
}

TEST(Issue10, RequestsAfterCloseFailAndCloseTwiceIsFine) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "f.bin", kTask);
  auto file = File::open(path, "r", config());
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(file->close().ok());
  EXPECT_TRUE(file->close().ok());
  std::vector<std::uint8_t> buf(kTask);
  auto r = file->pread(buf.data(), kTask, 0).get();
  EXPECT_THAT(r, StatusIs(ErrorCode::failed_precondition, HasSubstr("is closed")));
  EXPECT_THAT(file->size(), StatusIs(ErrorCode::failed_precondition));
  EXPECT_THAT(file->sync(), StatusIs(ErrorCode::failed_precondition));
}

TEST(Issue10, CloseFromManyThreadsWhileReadsRun) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "f.bin", 16 * kTask);
  for (int round = 0; round < 20; ++round) {
    auto file = File::open(path, "r", config(3));
    ASSERT_TRUE(file.ok());
    std::vector<std::thread> threads;
    std::atomic<int> wrong{0};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::vector<std::uint8_t> buf(16 * kTask);
        for (int i = 0; i < 5; ++i) {
          auto r = file->pread(buf.data(), buf.size(), 0).get();
          if (r.ok() ? buf != testing::pattern(0, buf.size())
                     : r.status().code() != ErrorCode::failed_precondition) {
            ++wrong;
          }
        }
        if (t == 0) (void)file->close();
      });
    }
    threads.emplace_back([&] { (void)file->close(); });
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
  }
}

// `ferry read f --offset 18446744073709551615 --size 1` said "read 1 B"; Python's
// pread(buf, offset=2**64-4096) returned 8192 with the buffer untouched.
TEST(Issue10, RangesPastTheLargestFileOffsetAreRejected) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "f.bin", kTask);
  auto file = File::open(path, "r+", config());
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(8192, 7);
  struct Case {
    std::uint64_t offset, size;
  } cases[] = {{UINT64_MAX, 1}, {UINT64_MAX - 4095, 8192}, {1ull << 63, 1}, {(1ull << 63) - 1, 2}};
  for (const Case& c : cases) {
    auto r = file->pread(buf.data(), c.size, c.offset).get();
    EXPECT_THAT(r, StatusIs(ErrorCode::invalid_argument, HasSubstr("largest file offset"))) << c.offset;
    auto w = file->pwrite(buf.data(), c.size, c.offset).get();
    EXPECT_THAT(w, StatusIs(ErrorCode::invalid_argument)) << c.offset;
  }
  EXPECT_EQ(std::vector<std::uint8_t>(buf.size(), 7), buf);
  // The last valid offset still works (and reads nothing: it is past the end).
  auto r = file->pread(buf.data(), 1, (1ull << 63) - 2).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 0u);
}

// The O_DIRECT descriptor is the same open file as the buffered one, even when another file is renamed
// over the path between the two opens.
TEST(Issue10, FileReplacedBetweenTheTwoOpensIsNeverMixedIn) {
  auto dir = testing::test_dir();
  auto path = dir / "f.bin";
  auto other = dir / "other.bin";
  testing::write_pattern_file(path, 8 * kTask);
  {
    std::ofstream out(other, std::ios::binary);
    std::vector<char> zeros(8 * kTask, 0);
    out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::open).only_direct().limit(1).runs_first([&] { std::filesystem::rename(other, path); }));
  Config c = config();
  c.set_direct_io(DirectIo::on);
  auto file = detail::open_file(path.string(), "r", c, detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  std::vector<std::uint8_t> buf(8 * kTask);
  auto r = file->pread(buf.data(), buf.size(), 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(buf, testing::pattern(0, buf.size())) << "bytes of the file renamed over the path were mixed in";
  EXPECT_EQ(r->report.io.buffered_ops + r->report.io.direct_ops, r->report.total_ops());
}

TEST(Issue10, OpeningAFifoFailsAtOnce) {
  auto dir = testing::test_dir();
  auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  for (const char* mode : {"r", "r+", "w"}) {
    auto f = File::open(fifo.string(), mode, config());
    ASSERT_FALSE(f.ok()) << mode;  // "w" fails with ENXIO (no reader), "r" and "r+" are refused
    EXPECT_THAT(f.status().message(), HasSubstr(mode[0] == 'w' ? "" : "FIFO (named pipe)"));
  }
  auto r = File::open(fifo.string(), "r", config());
  EXPECT_THAT(r, StatusIs(ErrorCode::invalid_argument));
  EXPECT_EQ(r.status().sys_errno(), ESPIPE);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// /proc files report size 0 whatever they hold; they used to read as empty without a word.
TEST(Issue10, ProcFilesAreReadToTheirEndWithANote) {
  std::ifstream in("/proc/version", std::ios::binary);
  std::string want((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(want.empty());
  auto file = File::open("/proc/version", "r", config());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  std::vector<char> buf(1 << 16, '#');
  auto r = file->pread(buf.data(), buf.size(), 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->bytes, want.size());
  EXPECT_EQ(std::string(buf.data(), want.size()), want);
  EXPECT_EQ(buf[want.size()], '#');
  ASSERT_FALSE(r->report.notes.empty());
  EXPECT_THAT(r->report.notes.front(), HasSubstr("read front to back"));
}

TEST(Issue10, CharacterDevicesAreReadInPlace) {
  auto file = File::open("/dev/zero", "r", config());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  std::vector<std::uint8_t> buf(3 * kTask + 5, 9);
  auto r = file->pread(buf.data(), buf.size(), 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, buf.size());
  EXPECT_EQ(buf, std::vector<std::uint8_t>(buf.size(), 0));
}

TEST(Issue10, CancelStopsARequestAtTheNextTask) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "f.bin", 64 * kTask);
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pread).sleeps(std::chrono::milliseconds(5)));
  auto file = detail::open_file(path, "r", config(1), detail::OpenOptions{.syscalls = &sys});
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(64 * kTask);
  Future f = file->pread(buf.data(), buf.size(), 0);
  while (sys.count(Op::pread) == 0) std::this_thread::yield();
  f.cancel();
  auto r = f.get();
  EXPECT_THAT(r, StatusIs(ErrorCode::cancelled));
  EXPECT_LT(sys.count(Op::pread), 10);
  // A cancelled request's File works as before.
  auto again = file->pread(buf.data(), kTask, 0).get();
  ASSERT_TRUE(again.ok());
}

}  // namespace
}  // namespace ferry
