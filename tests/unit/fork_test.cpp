// A process forked after it read through Ferry reads through Ferry in the child. fork() copies none of the
// engine's threads, and a lock a worker held at that moment would stay held in the child: before the fix,
// a data loader's worker process forked after its parent had read (a checkpoint, say) hung at its first
// read of more than one task.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "ferry/ferry.hpp"
#include "file/open_options.hpp"
#include "platform/dynamic_library.hpp"
#include "support/busy_pool.hpp"
#include "support/memory_source.hpp"
#include "support/test_files.hpp"

namespace ferry {
namespace {

constexpr std::uint64_t kTask = 64 * 1024;
constexpr std::uint64_t kSize = 16 * kTask;

Config config() {
  Config c;
  c.set_task_size(kTask).set_threads(4).set_direct_io(DirectIo::off);
  return c;
}

// Reads the whole file (16 tasks) through `f` into host memory and checks it and the byte after it. The exit
// status of a child: 0 when all is right.
int read_and_check(File& f) {
  std::vector<std::uint8_t> buf(kSize + 1, 0xA5);
  auto r = f.pread(buf.data(), kSize, 0).get();
  if (!r.ok() || r->bytes != kSize) return 3;
  const std::vector<std::uint8_t> want = testing::pattern(0, kSize);
  if (std::memcmp(buf.data(), want.data(), kSize) != 0) return 4;
  return buf[kSize] == 0xA5 ? 0 : 5;
}

// The same through a File of its own (2: it could not be opened).
int read_and_check(const std::string& path) {
  auto f = File::open(path, "r", config());
  return f.ok() ? read_and_check(*f) : 2;
}

// Runs `body` in a forked child, which alarm() ends after `seconds`; the child's exit status, 128 + the signal
// that ended it, or -1 when it had to be killed after 30 s.
int in_child(const std::function<int()>& body, unsigned seconds = 20) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(seconds);
    ::_exit(body());  // no atexit handlers or gtest teardown in the child
  }
  for (int i = 0; i < 3000; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ::usleep(10000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

#if defined(__SANITIZE_THREAD__)
#define SKIP_UNDER_TSAN() \
  GTEST_SKIP() << "ThreadSanitizer does not support starting threads after a multi-threaded fork"
#else
#define SKIP_UNDER_TSAN() (void)0
#endif

TEST(Fork, AChildReadsThroughFerryAfterItsParentDid) {
  SKIP_UNDER_TSAN();
  const std::string path = testing::write_pattern_file(testing::test_dir() / "data.bin", kSize);
  ASSERT_EQ(read_and_check(path), 0) << "the parent's own read";
  EXPECT_EQ(in_child([&] { return read_and_check(path); }), 0) << "2-5: a wrong read; 142 (SIGALRM): it hung";
  EXPECT_EQ(read_and_check(path), 0) << "the parent's read after the fork";
}

// CUDA does not survive fork(): a child of a process that started it must not call the driver (every call
// fails there), and reads into host memory must work as before. Where there is no driver (CI), the parent's
// CUDA does not start and the child's read is the plain case again.
TEST(Fork, AChildOfAProcessThatStartedCudaReadsHostMemoryAndSaysWhyItHasNoGpu) {
  SKIP_UNDER_TSAN();
  const std::string path = testing::write_pattern_file(testing::test_dir() / "data.bin", kSize);
  const bool parent_has_cuda = cuda_driver_status().ok();
  ASSERT_EQ(read_and_check(path), 0) << "the parent's own read";
  EXPECT_EQ(in_child([&] {
              if (int wrong = read_and_check(path); wrong != 0) return wrong;
              const Status in_child = cuda_driver_status();
              if (!parent_has_cuda) return 0;
              if (in_child.ok()) return 6;
              return in_child.message().find("fork") != std::string::npos ? 0 : 7;
            }),
            0)
      << "2-5: a wrong read; 6: CUDA said usable in the child; 7: the reason does not name fork; 142: it hung";
  EXPECT_EQ(cuda_driver_status().ok(), parent_has_cuda) << "the parent's CUDA after the fork";
}

TEST(Fork, ChildrenForkedWhileTheParentReadsOnOtherThreads) {
  SKIP_UNDER_TSAN();
  // Workers busy, taking the pool's lock and the process report's, at the moment of each fork.
  const std::string path = testing::write_pattern_file(testing::test_dir() / "data.bin", kSize);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        if (read_and_check(path) != 0) ++wrong;
      }
    });
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(in_child([&] { return read_and_check(path); }), 0) << "child " << i;
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0) << "the parent's reads while it forked";
}

// Every request asks whether CUDA was loaded since the last (loaded_libraries_version(), a walk of the loaded
// objects). glibc holds its loader lock during such a walk and fork() leaves it held in the child, whose own
// first walk then waits for good: a data loader's worker forked while another thread read through Ferry hung
// at its first read (80 of 100 children of a process that walks in a loop hung on Debian 12). Ferry's walks
// are held off across fork().
TEST(Fork, AChildForkedWhileAnotherThreadWalksTheLoadedLibrariesWalksThemToo) {
  SKIP_UNDER_TSAN();
  std::atomic<bool> stop{false};
  std::thread walker([&] {
    while (!stop.load()) (void)detail::loaded_libraries_version();
  });
  int wrong = 0;
  for (int i = 0; i < 50 && wrong == 0; ++i) {
    wrong = in_child([] { return detail::loaded_libraries_version() > 0 ? 0 : 1; }, 2);
  }
  stop = true;
  walker.join();
  EXPECT_EQ(wrong, 0) << "142 (SIGALRM): a child hung at its walk; 1: it found no libraries";
}

// A File's lock copied held into a child (a parent thread inside it at the fork: here one that asks for the
// File's report in a loop) kept the child's first request through that File from ending. A File's uses, report
// and position are each process's own.
TEST(Fork, AChildReadsThroughAFileWhoseLockAnotherParentThreadHeld) {
  SKIP_UNDER_TSAN();
  const std::string path = testing::write_pattern_file(testing::test_dir() / "data.bin", kSize);
  auto f = File::open(path, "r", config());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ(read_and_check(*f), 0) << "the parent's own read";
  std::atomic<bool> stop{false};
  std::thread asker([&] {
    while (!stop.load()) (void)f->report();
  });
  int wrong = 0;
  for (int i = 0; i < 20 && wrong == 0; ++i) wrong = in_child([&] { return read_and_check(*f); }, 5);
  stop = true;
  asker.join();
  EXPECT_EQ(wrong, 0) << "142 (SIGALRM): a child hung; 3-5: a wrong read";
  EXPECT_EQ(read_and_check(*f), 0) << "the parent's read after the forks";
}

// A File opened before a fork and read in the child: the small reads the parent had gathered at that moment
// (queued, their drainer waiting for a worker) are the parent's, and the child's own reads kept in flight are
// gathered and drained in the child. Before, the child took over the parent's count of drainers at work, none
// of which exist there, and its reads waited for good.
TEST(Fork, AChildReadsAheadOnAFileWhoseParentHadGatheredReadsQueued) {
  SKIP_UNDER_TSAN();
  const std::string path = testing::write_pattern_file(testing::test_dir() / "data.bin", kSize);
  Config c;
  c.set_threads(4);  // direct_io=auto: the file's small hot reads are gathered
  auto f = File::open(path, "r", c);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> first(4096), second(4096);
  testing::BusyPool busy(4);  // as many as the File's threads: no worker is started for its drainer
  Future a = f->pread(first.data(), 4096, 0);
  Future b = f->pread(second.data(), 4096, 4096);  // gathered: queued, its drainer waiting for a worker
  const int child = in_child([&] {
    std::vector<std::uint8_t> mem(3 * 4096);
    std::vector<Future> live;
    for (std::uint64_t i = 0; i < 3; ++i) live.push_back(f->pread(mem.data() + i * 4096, 4096, (i + 2) * 4096));
    for (auto& fut : live) {
      auto r = fut.get();
      if (!r.ok() || r->bytes != 4096) return 3;
    }
    return std::memcmp(mem.data(), testing::pattern(2 * 4096, 3 * 4096).data(), mem.size()) == 0 ? 0 : 4;
  });
  busy.release();
  EXPECT_EQ(child, 0) << "3-4: a wrong read; 142 (SIGALRM): it hung";
  EXPECT_TRUE(a.get().ok());
  EXPECT_TRUE(b.get().ok());
  EXPECT_EQ(second, testing::pattern(4096, 4096));
}

// Regression (issue 49, 3): a child forked while its parent had a request in flight on a File hung for good
// in that File's close(), which waited for the parent's request: it never ends in the child, whose copy of
// the engine has none of the parent's threads. The child's close() waits only for its own requests now.
TEST(Fork, AChildClosesAFileWhoseParentHasARequestInFlight) {
  SKIP_UNDER_TSAN();
  auto source = std::make_shared<testing::MemorySource>("held.bin", testing::pattern(0, kSize));
  const pid_t parent = ::getpid();
  std::atomic<bool> release{false};
  std::atomic<bool> reading{false};
  source->before_read = [&](const detail::Task&) {
    if (::getpid() != parent) return;  // the child's own reads go on
    reading = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  auto f = detail::open_source(source, "r", config(), detail::OpenOptions{});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> held(kSize);
  Future in_flight = f->pread(held.data(), kSize, 0);
  while (!reading) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int child = in_child([&] {
    std::vector<std::uint8_t> buf(kTask);
    auto r = f->pread(buf.data(), kTask, 0).get();
    if (!r.ok() || r->bytes != kTask) return 3;
    return f->close().ok() ? 0 : 4;
  });
  release = true;
  EXPECT_EQ(child, 0) << "3, 4: the child's read or close failed; 142 (SIGALRM): its close() hung";
  auto r = in_flight.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kSize);
  EXPECT_TRUE(f->close().ok());
}

}  // namespace
}  // namespace ferry
