// The engine's queue (engine/queue.hpp) seen from a File: small reads in flight are taken together by the
// pool's workers (into GPU memory through one bounce buffer), each read still its own request with its own
// Future and report. Every byte checked, and the bytes around each destination; host memory (host route) and
// fake device memory (staged route); cancelled, shrinking-file and closing cases; a thread that waits for each
// read runs it itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <vector>

#include "backends/staging_pool.hpp"
#include "base/process_limits.hpp"
#include "engine/queue.hpp"
#include "ferry/ferry.hpp"
#include "file/file_state.hpp"
#include "file/open_options.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/busy_pool.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_platform.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ::testing::HasSubstr;

namespace ferry {
namespace {

using testing::StatusIs;

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kFile = 512 * kPage + 777;  // not a whole number of pages
constexpr std::uint8_t kPoison = 0xA5;

class Queue : public ::testing::Test {
 protected:
  void SetUp() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    path_ = testing::write_pattern_file(testing::test_dir() / "gather.bin", kFile);
  }
  void TearDown() override {
    detail::process_staging_pool().clear();
    (void)testing::fake_cuda_api().cuCtxSetCurrent(nullptr);
    testing::reset_fake_cuda();
  }

  File open(unsigned threads = 4, detail::Syscalls* syscalls = nullptr) {
    Config c;
    c.set_threads(threads).set_bounce_buffer_size(64 * kPage);
    detail::OpenOptions o;
    o.gpu = &testing::fake_gpu_platform();
    if (syscalls != nullptr) o.syscalls = syscalls;
    auto f = detail::open_file(path_, "r", c, o);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }

  // Reads `count` pieces of `size` bytes at random offsets (some unaligned, the last ones past the end of the
  // file) into slots of `memory` a page apart plus a poisoned gap, all in flight from this thread, then
  // checks every byte, the gaps, each read's own report, and that the File's report adds them up. Returns the
  // reads gathered.
  static std::uint64_t read_ahead(File& f, std::uint8_t* memory, std::size_t count, std::uint64_t size, Route route) {
    const Report before = f.report();
    const std::uint64_t slot = size + kPage;
    std::memset(memory, kPoison, count * slot);
    std::mt19937_64 rng(7);
    std::vector<std::uint64_t> offsets;
    for (std::size_t i = 0; i < count; ++i) {
      std::uint64_t at = (rng() % (kFile / kPage)) * kPage + (i % 5 == 0 ? 100 : 0);
      if (i + 2 >= count) at = kFile - size / 2;  // crosses the end: half of it is there
      offsets.push_back(at);
    }
    std::vector<Future> live;
    for (std::size_t i = 0; i < count; ++i) live.push_back(f.pread(memory + i * slot, size, offsets[i]));
    std::uint64_t gathered = 0, ops = 0;  // (an unaligned read that is more than one task is not gathered)
    for (std::size_t i = 0; i < count; ++i) {
      auto r = live[i].get();
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      if (!r.ok()) continue;
      const std::uint64_t want = std::min(size, kFile - offsets[i]);
      EXPECT_EQ(r->bytes, want) << "read " << i;
      EXPECT_GE(r->report.at(route).ops, 1u) << "read " << i;
      EXPECT_EQ(r->report.total_ops(), r->report.at(route).ops) << "read " << i;
      EXPECT_LE(r->report.io.gathered_ops, r->report.total_ops()) << "read " << i;
      ops += r->report.total_ops();
      gathered += r->report.io.gathered_ops;
      const std::uint8_t* at = memory + i * slot;
      EXPECT_EQ(std::vector<std::uint8_t>(at, at + want), testing::pattern(offsets[i], want)) << "read " << i;
      for (std::uint64_t k = want; k < slot; ++k) {
        if (at[k] != kPoison) {
          ADD_FAILURE() << "read " << i << " wrote byte " << k << " past its " << want << " bytes";
          break;
        }
      }
    }
    const Report after = f.report();
    EXPECT_EQ(after.at(route).ops - before.at(route).ops, ops);
    EXPECT_EQ(after.io.gathered_ops - before.io.gathered_ops, gathered) << "the File's report adds up its reads'";
    return gathered;
  }

  // `count` slots of `size` bytes and a page's gap each in fake device memory.
  static std::uint8_t* device_slots(std::size_t count, std::uint64_t size) {
    return static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(count * (size + kPage)));
  }

  std::string path_;
};

// Host reads go straight into place, an op a take: nothing is gained by taking them together.
TEST_F(Queue, HostReadsInFlightFromOneThreadEachLandWhole) {
  File f = open();
  constexpr std::size_t kReads = 400;
  std::vector<std::uint8_t> memory(kReads * (kPage + kPage));
  EXPECT_EQ(read_ahead(f, memory.data(), kReads, kPage, Route::host), 0u);
}

TEST_F(Queue, DeviceReadsAreGatheredThroughTheStagedRoute) {
  File f = open();
  EXPECT_GT(read_ahead(f, device_slots(300, 3 * kPage), 300, 3 * kPage, Route::staged), 0u);
}

// Larger reads are taken together too, as many as a bounce buffer holds.
TEST_F(Queue, LargerDeviceReadsAreGathered) {
  File f = open();
  if (!f.direct_io_available()) GTEST_SKIP() << "no O_DIRECT on this file system: " << f.direct_io_note();
  std::uint8_t* dev = device_slots(200, 16 * kPage);
  auto first = f.pread(dev, 16 * kPage, 0).get();  // one at a time: probed, not gathered
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->report.io.gathered_ops, 0u);
  EXPECT_GT(read_ahead(f, dev, 200, 16 * kPage, Route::staged), 0u);
}

// Reads that wait for the disk get a worker each, up to the File's threads. Here the page cache holds nothing
// the file's reads ask for (as the kernel says it).
TEST_F(Queue, ReadsOfAFileWhosePagesAreNotCachedLandExactly) {
  testing::ScriptedSyscalls sys;
  sys.add(testing::Rule::on(testing::Op::pread).only_nowait().fail(EAGAIN));
  sys.add(testing::Rule::on(testing::Op::cached_pages).reports_cached(false));
  File f = open(4, &sys);
  std::uint8_t* dev = device_slots(64, 16 * kPage);
  for (std::uint64_t size : {kPage, 16 * kPage}) {
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(f.pread(dev, size, i * size).get().ok());  // one at a time: they miss
    std::vector<Future> live;
    auto offset = [&](std::uint64_t i) { return (i * size) % (256 * kPage); };
    for (std::uint64_t i = 0; i < 64; ++i) live.push_back(f.pread(dev + i * size, size, offset(i)));
    for (std::uint64_t i = 0; i < 64; ++i) {
      auto r = live[i].get();
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(std::vector<std::uint8_t>(dev + i * size, dev + (i + 1) * size), testing::pattern(offset(i), size));
    }
  }
}

// Only a queue with no worker at it leaves a read to its thread for a moment (engine.md): a read sent while
// another is in flight goes to a worker at once (its thread waits for the older read first, and a cold read
// held back is depth the disk does not get).
TEST_F(Queue, AReadSentWhileAnotherIsInFlightGoesToTheWorkersAtOnce) {
  testing::ScriptedSyscalls sys;
  sys.add(testing::Rule::on(testing::Op::pread).only_nowait().fail(EAGAIN));
  sys.add(testing::Rule::on(testing::Op::cached_pages).reports_cached(false));
  File f = open(4, &sys);
  std::uint8_t* dev = device_slots(2, kPage);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(f.pread(dev, kPage, i * kPage).get().ok());  // one at a time: they miss
  std::memset(dev, kPoison, 4 * kPage);
  detail::ThreadPool& pool = detail::shared_pool();
  testing::BusyPool busy(4);  // no worker takes a job meanwhile: what is queued stays as it was queued
  const std::size_t held_before = pool.queued_with_grace();
  Future first = f.pread(dev, kPage, 8 * kPage);
  EXPECT_EQ(pool.queued_with_grace(), held_before + 1) << "a thread's only read is left to it for a moment";
  Future second = f.pread(dev + 2 * kPage, kPage, 20 * kPage);
  EXPECT_EQ(pool.queued_with_grace(), held_before + 1) << "the second read was held for a grace period";
  busy.release();
  for (auto* fut : {&first, &second}) {
    auto r = fut->get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, kPage);
  }
  EXPECT_EQ(std::vector<std::uint8_t>(dev, dev + kPage), testing::pattern(8 * kPage, kPage));
  EXPECT_EQ(std::vector<std::uint8_t>(dev + 2 * kPage, dev + 3 * kPage), testing::pattern(20 * kPage, kPage));
  for (std::uint64_t k : {kPage, 2 * kPage - 1, 3 * kPage, 4 * kPage - 1}) EXPECT_EQ(dev[k], kPoison) << k;
}

// Between two reads from one thread the queue is often empty for a moment: a drainer that found it so stays a
// little (OpQueue::linger), so that the next read needs no worker started, a wake on the submitting thread.
TEST_F(Queue, ReadsInFlightFromOneThreadStartFewerWorkersThanReads) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "under ThreadSanitizer a read takes longer than the 50 us a drainer stays (125-240 us a read "
                  "here, with 667-1,154 workers started): the count says nothing";
#endif
  if (detail::usable_cores() < 4) {
    GTEST_SKIP() << "a drainer stays only where a core is left for it beside the submitter and the drainers at "
                    "work; this process has "
                 << detail::usable_cores() << " (the GPU machine's run of the CPU tests covers it)";
  }
  File f = open();
  constexpr std::size_t kReads = 2000, kInFlight = 4;
  std::vector<std::uint8_t> out(kInFlight * kPage, kPoison);
  detail::ThreadPool& pool = detail::shared_pool();
  const std::uint64_t jobs_before = pool.submitted();
  std::deque<std::pair<Future, std::uint64_t>> live;  // (read, its offset)
  auto check_oldest = [&] {
    auto& [read, at] = live.front();
    auto r = read.get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::size_t slot = (at / kPage) % kInFlight;
    EXPECT_EQ(std::vector<std::uint8_t>(out.begin() + slot * kPage, out.begin() + (slot + 1) * kPage),
              testing::pattern(at, kPage));
    live.pop_front();
  };
  for (std::size_t i = 0; i < kReads; ++i) {
    if (live.size() == kInFlight) check_oldest();
    const std::uint64_t at = (i % 256) * kPage;
    live.emplace_back(f.pread(out.data() + ((at / kPage) % kInFlight) * kPage, kPage, at), at);
  }
  while (!live.empty()) check_oldest();
  const std::uint64_t jobs = pool.submitted() - jobs_before;
  EXPECT_LT(jobs, kReads / 4) << "workers started for " << kReads << " reads kept " << kInFlight << " in flight";
}

// A small read from memory pushed while the only drainer is busy reading is left to it: that drainer is back
// for it within a read, and starting another wakes a pool thread, which cost the GPU machine's submitting thread
// about 6 us a start (bench/results/2026-12-06-h100-spread). A busy drainer counts as a taker of four.
TEST_F(Queue, SmallReadsPushedWhileTheDrainerIsBusyWaitForItRatherThanWakeAnother) {
  std::atomic<int> nowait_reads{0};
  std::atomic<bool> first_in_read{false}, go{false};
  testing::ScriptedSyscalls sys;
  sys.add(testing::Rule::on(testing::Op::pread).only_nowait().runs_first([&] {
    if (++nowait_reads != 1) return;
    first_in_read = true;
    while (!go) std::this_thread::yield();
  }));
  File f = open(4, &sys);
  struct Go {  // the first read goes on however the test ends (before the File closes, which waits for it)
    std::atomic<bool>& go;
    ~Go() { go = true; }
  } go_at_end{go};
  constexpr std::size_t kReads = 4;  // the first, then three more: fewer than four for the busy drainer
  std::vector<std::uint8_t> out(kReads * kPage, kPoison);
  std::vector<Future> reads;
  reads.push_back(f.pread(out.data(), kPage, 0));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!first_in_read && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_TRUE(first_in_read) << "no drainer began the first read";
  detail::ThreadPool& pool = detail::shared_pool();
  const std::uint64_t jobs_before = pool.submitted();
  for (std::size_t i = 1; i < kReads; ++i) reads.push_back(f.pread(out.data() + i * kPage, kPage, i * kPage));
  const std::uint64_t started = pool.submitted() - jobs_before;
  go = true;
  for (auto& r : reads) {
    auto got = r.get();
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->bytes, kPage);
  }
  EXPECT_EQ(started, 0u) << "drainers started for " << kReads - 1 << " small reads while one drainer read";
  for (std::size_t i = 0; i < kReads; ++i) {
    EXPECT_EQ(std::vector<std::uint8_t>(out.begin() + i * kPage, out.begin() + (i + 1) * kPage),
              testing::pattern(i * kPage, kPage))
        << "read " << i;
  }
}

// Small reads from memory kept in flight from one thread are taken together, but reads that take longer than
// they take to push must still spread over the workers (with 4 workers and the waiter, 4-5 at once here).
TEST_F(Queue, SlowReadsInFlightFromOneThreadSpreadOverTheWorkers) {
  std::atomic<int> reading{0}, most{0};
  testing::ScriptedSyscalls sys;
  sys.add(testing::Rule::on(testing::Op::pread).only_nowait().runs_first([&] {
    const int now = ++reading;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --reading;
  }));
  File f = open(4, &sys);
  constexpr std::size_t kReads = 96, kInFlight = 16;
  std::uint8_t* dev = device_slots(kInFlight, kPage);
  std::memset(dev, kPoison, kInFlight * 2 * kPage);
  std::deque<std::pair<Future, std::uint64_t>> live;  // (read, its offset)
  auto check_oldest = [&] {
    auto& [read, at] = live.front();
    auto r = read.get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::uint8_t* slot = dev + ((at / kPage) % kInFlight) * 2 * kPage;
    EXPECT_EQ(std::vector<std::uint8_t>(slot, slot + kPage), testing::pattern(at, kPage));
    EXPECT_EQ(slot[kPage], kPoison) << "past the read at " << at;
    live.pop_front();
  };
  for (std::size_t i = 0; i < kReads; ++i) {
    if (live.size() == kInFlight) check_oldest();
    const std::uint64_t at = i * kPage;
    live.emplace_back(f.pread(dev + (i % kInFlight) * 2 * kPage, kPage, at), at);
  }
  while (!live.empty()) check_oldest();
  EXPECT_GE(most.load(), 3) << "reads of 2 ms each, " << kInFlight << " in flight, 4 workers";
}

TEST_F(Queue, AThreadThatWaitsForEachReadRunsItItself) {
  File f = open();
  std::vector<std::uint8_t> out(kPage);
  for (int i = 0; i < 50; ++i) {
    auto r = f.pread(out.data(), kPage, i * kPage).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(out, testing::pattern(i * kPage, kPage));
  }
  EXPECT_EQ(f.report().io.gathered_ops, 0u) << "one read at a time runs on its own (the waiter runs it)";
}

TEST_F(Queue, ReadsFromManyThreadsEachKeepingSeveralInFlight) {
  File f = open(6);
  constexpr int kThreads = 6, kRounds = 40, kDepth = 4;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<std::uint8_t> memory(kDepth * kPage);
      for (int round = 0; round < kRounds; ++round) {
        std::vector<Future> live;
        std::vector<std::uint64_t> at;
        for (int d = 0; d < kDepth; ++d) {
          at.push_back((rng() % (kFile / kPage)) * kPage);
          live.push_back(f.pread(memory.data() + d * kPage, kPage, at.back()));
        }
        for (int d = 0; d < kDepth; ++d) {
          auto r = live[d].get();
          if (!r.ok() || r->bytes != kPage ||
              std::vector<std::uint8_t>(memory.data() + d * kPage, memory.data() + (d + 1) * kPage) !=
                  testing::pattern(at[d], kPage)) {
            ++wrong;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(f.report().at(Route::host).ops, static_cast<std::uint64_t>(kThreads * kRounds * kDepth));
}

// A push that finds a drainer counted takes no lock and starts none (engine/queue.hpp, drainers_will_take): a
// drainer that leaves after it counted looks at what was pushed again. Reads that nobody waits for (done() only:
// a waiter would run its own read itself) would stay undone if one were left without a drainer. One thread pushes
// one read at a time with short pauses (on 2 cores no drainer stays for more): drainers leave as reads come.
TEST_F(Queue, ReadsNobodyWaitsForCompleteWhileDrainersComeAndGo) {
  File f = open(4);
  constexpr int kRounds = 20000;
  std::atomic<int> undone{0}, wrong{0};
  std::thread reader([&] {
    std::mt19937_64 rng(11);
    std::vector<std::uint8_t> memory(kPage);
    for (int round = 0; round < kRounds && undone == 0; ++round) {
      const std::uint64_t at = (rng() % (kFile / kPage)) * kPage;
      Future read = f.pread(memory.data(), kPage, at);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!read.done()) {
        if (std::chrono::steady_clock::now() > deadline) {
          ++undone;
          read.cancel();
          break;
        }
        std::this_thread::yield();
      }
      auto r = read.get();
      if (undone == 0 && (!r.ok() || r->bytes != kPage || memory != testing::pattern(at, kPage))) ++wrong;
      const auto pause = std::chrono::steady_clock::now() + std::chrono::nanoseconds(rng() % 3000);
      while (std::chrono::steady_clock::now() < pause) {
      }
    }
  });
  reader.join();
  EXPECT_EQ(undone.load(), 0) << "a read was left without a drainer (not done within 10 s)";
  EXPECT_EQ(wrong.load(), 0);
}

// With every worker busy nothing is taken: what happens to the queued reads meanwhile is up to the test.
TEST_F(Queue, AReadCancelledBeforeItIsTakenDoesNoIo) {
  File f = open();
  std::vector<std::uint8_t> first(kPage), second(kPage, kPoison), third(kPage);
  testing::BusyPool busy(4);  // as many as the File's threads: no worker is started for its queue
  Future a = f.pread(first.data(), kPage, 0);
  Future b = f.pread(second.data(), kPage, kPage);
  Future c = f.pread(third.data(), kPage, 2 * kPage);
  b.cancel();
  busy.release();
  EXPECT_THAT(b.get().status(), StatusIs(ErrorCode::cancelled));
  EXPECT_EQ(second, std::vector<std::uint8_t>(kPage, kPoison)) << "a cancelled read wrote its destination";
  auto rc = c.get();
  ASSERT_TRUE(rc.ok()) << rc.status().to_string();
  EXPECT_EQ(third, testing::pattern(2 * kPage, kPage));
  auto r = a.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(first, testing::pattern(0, kPage));
}

TEST_F(Queue, AFileThatShrankBeforeTheReadWasTakenFailsItNamingIt) {
  File f = open();
  std::vector<std::uint8_t> first(kPage), last(kPage, kPoison);
  testing::BusyPool busy(4);  // as many as the File's threads: no worker is started for its queue
  Future a = f.pread(first.data(), kPage, 0);
  Future b = f.pread(last.data(), kPage, 500 * kPage);
  Future c = f.pread(first.data(), kPage, kPage);
  ASSERT_EQ(::truncate(path_.c_str(), 500 * kPage + 100), 0);
  busy.release();
  auto rc = c.get();
  ASSERT_TRUE(rc.ok()) << rc.status().to_string();
  auto r = b.get();
  EXPECT_THAT(r.status(), StatusIs(ErrorCode::io_error));
  EXPECT_THAT(r.status().message(), HasSubstr("shrank during the read"));
  EXPECT_THAT(r.status().message(), HasSubstr(path_));
  EXPECT_EQ(std::vector<std::uint8_t>(last.begin() + 100, last.end()), std::vector<std::uint8_t>(kPage - 100, kPoison))
      << "bytes past the file's new end were written";
  EXPECT_TRUE(a.get().ok());
}

// Into GPU memory, inside the size the File saw last, a one-task read asks for no size of its own: a file that
// shrank before it was taken ends it where the data does, and nothing past that is written.
TEST_F(Queue, ADeviceReadInsideTheSizeSeenLastNeedsNoSizeOfItsOwn) {
  testing::ScriptedSyscalls sys;
  File f = open(4, &sys);
  auto* dev = device_slots(2, kPage);
  std::memset(dev, kPoison, 2 * (kPage + kPage));
  ASSERT_TRUE(f.pread(dev, kPage, 0).get().ok());  // asks for the size
  const int sizes_asked = sys.count(testing::Op::fstat);
  testing::BusyPool busy(4);  // as many as the File's threads: no worker is started for its queue
  Future a = f.pread(dev, kPage, kPage);
  Future b = f.pread(dev + 2 * kPage, kPage, 500 * kPage);
  EXPECT_EQ(sys.count(testing::Op::fstat), sizes_asked) << "a or b asked for the size again";
  ASSERT_EQ(::truncate(path_.c_str(), 500 * kPage + 100), 0);
  busy.release();
  auto r = b.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 100u) << "the read ends where the data does";
  EXPECT_EQ(std::vector<std::uint8_t>(dev + 2 * kPage, dev + 2 * kPage + 100), testing::pattern(500 * kPage, 100));
  EXPECT_EQ(std::vector<std::uint8_t>(dev + 2 * kPage + 100, dev + 4 * kPage),
            std::vector<std::uint8_t>(2 * kPage - 100, kPoison))
      << "bytes past the end of the data were written";
  EXPECT_TRUE(a.get().ok());
}

// While a request lands in a GPU allocation, that allocation cannot have been freed: the next requests into it
// are classified as that one was, with no driver call (from any thread). A destination elsewhere, one that
// runs past the allocation (then refused, as always), or one after the requests into it completed is asked
// about.
TEST_F(Queue, ReadsIntoTheAllocationOfAReadInFlightAskTheDriverNothing) {
  File f = open();
  auto* dev = device_slots(8, kPage);  // one allocation: 8 slots of a page and a page's gap
  auto* other = device_slots(1, kPage);
  std::memset(dev, kPoison, 8 * 2 * kPage);
  ASSERT_TRUE(f.pread(dev, kPage, 0).get().ok());
  const std::uint64_t asked = testing::fake_cuda_counters().pointer_queries;
  std::vector<Future> live;
  {
    testing::BusyPool busy(4);  // as many as the File's threads: the reads stay in flight
    live.push_back(f.pread(dev, kPage, kPage));  // the one before it is done: asks
    for (int i = 1; i < 7; ++i) live.push_back(f.pread(dev + i * 2 * kPage, kPage, (i + 1) * kPage));
    std::thread([&] { live.push_back(f.pread(dev + 7 * 2 * kPage, kPage, 8 * kPage)); }).join();
    EXPECT_EQ(testing::fake_cuda_counters().pointer_queries, asked + 1) << "reads into the allocation in flight asked";
    live.push_back(f.pread(other, kPage, 20 * kPage));  // another allocation
    EXPECT_EQ(testing::fake_cuda_counters().pointer_queries, asked + 2);
    Future past_the_end = f.pread(other + kPage, 2 * kPage, 0);  // back in other's, but running past its end
    EXPECT_THAT(past_the_end.get().status(), StatusIs(ErrorCode::invalid_argument, HasSubstr("does not fit")));
    EXPECT_EQ(testing::fake_cuda_counters().pointer_queries, asked + 3);
  }
  for (int i = 0; i < 8; ++i) {
    auto r = live[i].get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::uint8_t* at = dev + i * 2 * kPage;
    EXPECT_EQ(std::vector<std::uint8_t>(at, at + kPage), testing::pattern((i + 1) * kPage, kPage)) << "read " << i;
    EXPECT_EQ(std::vector<std::uint8_t>(at + kPage, at + 2 * kPage), std::vector<std::uint8_t>(kPage, kPoison))
        << "read " << i << " wrote past its page";
  }
  ASSERT_TRUE(live[8].get().ok());
  EXPECT_EQ(std::vector<std::uint8_t>(other, other + kPage), testing::pattern(20 * kPage, kPage));
  ASSERT_TRUE(f.pread(other, kPage, 0).get().ok());
  EXPECT_EQ(testing::fake_cuda_counters().pointer_queries, asked + 4) << "no read was in flight: it asks again";
}

TEST_F(Queue, ACallbackOfAReadInFlightMayCloseTheFile) {
  File f = open();
  std::vector<std::uint8_t> memory(8 * kPage);
  std::vector<Future> live;
  for (int i = 0; i < 8; ++i) live.push_back(f.pread(memory.data() + i * kPage, kPage, i * kPage));
  std::atomic<int> closed{0};
  live.back().then([&](const Result<Transfer>&) {
    if (f.close().ok()) ++closed;
  });
  for (auto& fut : live) EXPECT_TRUE(fut.get().ok());
  for (int spin = 0; spin < 5000 && closed.load() == 0; ++spin) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(closed.load(), 1);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(std::vector<std::uint8_t>(memory.data() + i * kPage, memory.data() + (i + 1) * kPage),
              testing::pattern(i * kPage, kPage));
  }
}

// close() returns once no read of the File does I/O any more: every read's bytes are in place then (its
// Future may be marked done a moment later: its use ends first, so that a callback may close the File).
TEST_F(Queue, CloseWaitsForTheIoOfReadsInFlight) {
  File f = open();
  std::vector<std::uint8_t> memory(32 * kPage, kPoison);
  std::vector<Future> live;
  for (int i = 0; i < 32; ++i) live.push_back(f.pread(memory.data() + i * kPage, kPage, i * kPage));
  EXPECT_TRUE(f.close().ok());
  const std::vector<std::uint8_t> at_close = memory;
  EXPECT_EQ(at_close, testing::pattern(0, 32 * kPage)) << "close() returned before every read's bytes landed";
  for (auto& fut : live) {
    auto r = fut.get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, kPage);
  }
}

// Issue 50: with the pinned budget held by others, the staged route's workers are told "not now": the reads'
// ops wait in the queue, not on a pool thread (a host read goes through meanwhile), and once a kit comes back
// a worker is called back and every byte lands. The reports say how long the reads waited.
TEST_F(Queue, WithThePinnedBudgetFullReadsWaitInTheQueueNotOnAPoolThread) {
  const Config before = default_config().value();
  Config budgeted = before;
  set_default_config(budgeted.set_pinned_budget(64 << 20));
  const detail::CudaApi& api = testing::fake_cuda_api();
  ASSERT_TRUE(detail::make_current(api, 0).ok());
  std::vector<std::unique_ptr<detail::StagingKit>> others;  // the whole budget, in another shape
  for (int i = 0; i < 8; ++i) {
    auto kit = detail::process_staging_pool().acquire({&api, 0, 4 << 20}, 2);
    ASSERT_TRUE(kit.ok()) << kit.status().to_string();
    others.push_back(std::move(*kit));
  }
  File f = open();
  constexpr std::size_t kReads = 24;
  constexpr std::uint64_t kSize = 3 * kPage;
  std::uint8_t* memory = device_slots(kReads, kSize);
  std::memset(memory, kPoison, kReads * (kSize + kPage));
  std::vector<Future> live;
  for (std::size_t i = 0; i < kReads; ++i) live.push_back(f.pread(memory + i * (kSize + kPage), kSize, i * 5 * kPage));
  EXPECT_FALSE(live[0].wait_for(std::chrono::milliseconds(100))) << "a read got staging beyond the budget";
  // The pool's threads are free: a host read (no staging) goes through while the device reads wait (on a
  // pool thread: wait_for() leaves it to the pool, where get() would run it here).
  std::vector<std::uint8_t> host(kPage);
  Future host_read = f.pread(host.data(), kPage, 0);
  ASSERT_TRUE(host_read.wait_for(std::chrono::seconds(10))) << "no pool thread took a host read";
  auto h = host_read.get();
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(host, testing::pattern(0, kPage));
  // A read cancelled while it waits ends at once, not when room comes.
  live.back().cancel();
  ASSERT_TRUE(live.back().wait_for(std::chrono::seconds(10))) << "a cancelled read waited for pinned memory";
  EXPECT_THAT(live.back().get().status(), StatusIs(ErrorCode::cancelled));
  live.pop_back();
  detail::process_staging_pool().release(std::move(others.back()));  // room for one worker's kit
  others.pop_back();
  for (std::size_t i = 0; i < live.size(); ++i) {
    auto r = live[i].get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, kSize);
    const std::uint8_t* at = memory + i * (kSize + kPage);
    EXPECT_EQ(std::vector<std::uint8_t>(at, at + kSize), testing::pattern(i * 5 * kPage, kSize)) << "read " << i;
    EXPECT_EQ(at[kSize], kPoison) << "read " << i << " wrote past its destination";
    if (i == 0) {
      EXPECT_GE(r->report.io.pinned_wait_ns, 90'000'000u) << "the first read's report does not say it waited";
      EXPECT_THAT(r->report.summary(), HasSubstr("for pinned memory"));
    }
  }
  EXPECT_LE(ferry::pinned_memory_use().pinned_bytes, 64u << 20);
  for (auto& kit : others) detail::process_staging_pool().release(std::move(kit));
  testing::fake_cuda_free(memory);
  set_default_config(before);
}

}  // namespace
}  // namespace ferry
