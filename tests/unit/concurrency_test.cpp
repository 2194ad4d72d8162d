// Many threads on one File, many Files at once, reads and writes on disjoint ranges, blocking read()
// from several threads, many outstanding futures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "ferry/ferry.hpp"
#include "support/test_files.hpp"

namespace ferry {
namespace {

constexpr std::uint64_t kTask = 64 * 1024;

Config config(unsigned threads = 4, DirectIo policy = DirectIo::automatic) {
  Config c;
  c.set_task_size(kTask).set_threads(threads).set_direct_io(policy);
  return c;
}

TEST(Concurrency, ManyThreadsPreadOneFileAtOnce) {
  auto dir = testing::test_dir();
  const std::uint64_t size = 16 * kTask + 77;
  auto path = testing::write_pattern_file(dir / "d.bin", size);
  auto file = File::open(path, "r", config(4, DirectIo::on));
  ASSERT_TRUE(file.ok());
  std::atomic<int> bad{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 25; ++i) {
        std::uint64_t offset = rng() % size;
        std::uint64_t want = 1 + rng() % (3 * kTask);
        std::vector<std::uint8_t> buf(want);
        auto r = file->pread(buf.data(), want, offset).get();
        std::uint64_t expect = std::min(want, size - offset);
        if (!r.ok() || r->bytes != expect) {
          ++bad;
          continue;
        }
        buf.resize(expect);
        if (buf != testing::pattern(offset, expect)) ++bad;
        ++done;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(done.load(), 8 * 25);
}

TEST(Concurrency, ManyFilesAtOnce) {
  auto dir = testing::test_dir();
  constexpr int kFiles = 6;
  std::vector<std::string> paths;
  for (int i = 0; i < kFiles; ++i) {
    paths.push_back(testing::write_pattern_file(dir / ("f" + std::to_string(i)), (i + 2) * kTask + i));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kFiles; ++i) {
    threads.emplace_back([&, i] {
      auto file = File::open(paths[i], "r", config(3));
      if (!file.ok()) {
        ++bad;
        return;
      }
      const std::uint64_t size = (i + 2) * kTask + i;
      for (int round = 0; round < 10; ++round) {
        std::vector<std::uint8_t> buf(size);
        auto r = file->pread(buf.data(), size, 0).get();
        if (!r.ok() || r->bytes != size || buf != testing::pattern(0, size)) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(Concurrency, MixedReadsAndWritesOnDisjointRanges) {
  auto dir = testing::test_dir();
  constexpr int kThreads = 6;
  const std::uint64_t slice = 2 * kTask + 4096 + 13;  // unaligned slices, so boundaries move around
  auto path = testing::write_pattern_file(dir / "d.bin", kThreads * slice);
  auto file = File::open(path, "r+", config(4));
  ASSERT_TRUE(file.ok());
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::uint64_t at = t * slice;
      std::vector<std::uint8_t> mine(slice), back(slice);
      for (int round = 0; round < 8; ++round) {
        if (t % 2 == 0) {
          // Writers store a round-specific byte and read it back.
          std::fill(mine.begin(), mine.end(), static_cast<std::uint8_t>(t * 16 + round));
          if (!file->pwrite(mine.data(), slice, at).get().ok()) ++bad;
          if (!file->pread(back.data(), slice, at).get().ok() || back != mine) ++bad;
        } else {
          // Readers' slices are never written: always the pattern.
          if (!file->pread(back.data(), slice, at).get().ok() || back != testing::pattern(at, slice)) ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  auto whole = testing::read_whole_file(path);
  for (int t = 0; t < kThreads; ++t) {
    for (std::uint64_t i = 0; i < slice; ++i) {
      std::uint64_t at = t * slice + i;
      std::uint8_t want = t % 2 == 0 ? static_cast<std::uint8_t>(t * 16 + 7) : testing::pattern_byte(at);
      ASSERT_EQ(whole[at], want) << "offset " << at;
    }
  }
}

TEST(Concurrency, BlockingReadsFromSeveralThreadsTakeDisjointChunks) {
  auto dir = testing::test_dir();
  constexpr std::uint64_t kChunk = 5000;
  constexpr int kChunks = 120;
  const std::uint64_t size = kChunk * kChunks;
  auto path = testing::write_pattern_file(dir / "d.bin", size);
  auto file = File::open(path, "r", config(2));
  ASSERT_TRUE(file.ok());
  // Identify each chunk by its first 8 bytes.
  std::map<std::vector<std::uint8_t>, int> index;
  for (int k = 0; k < kChunks; ++k) index[testing::pattern(k * kChunk, 8)] = k;
  ASSERT_EQ(index.size(), static_cast<std::size_t>(kChunks));
  std::mutex m;
  std::vector<int> seen(kChunks, 0);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<std::uint8_t> buf(kChunk);
      for (;;) {
        auto r = file->read(buf.data(), kChunk);
        if (!r.ok()) {
          ++bad;
          return;
        }
        if (r->bytes == 0) return;
        auto it = index.find(std::vector<std::uint8_t>(buf.begin(), buf.begin() + 8));
        if (r->bytes != kChunk || it == index.end() || buf != testing::pattern(it->second * kChunk, kChunk)) {
          ++bad;
          return;
        }
        std::lock_guard<std::mutex> lock(m);
        ++seen[it->second];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  for (int k = 0; k < kChunks; ++k) EXPECT_EQ(seen[k], 1) << "chunk " << k;
}

TEST(Concurrency, ManyOutstandingFuturesFromOneThread) {
  auto dir = testing::test_dir();
  constexpr int kRequests = 64;
  const std::uint64_t size = kRequests * (kTask / 2);
  auto path = testing::write_pattern_file(dir / "d.bin", size);
  auto file = File::open(path, "r", config(4));
  ASSERT_TRUE(file.ok());
  std::vector<std::vector<std::uint8_t>> bufs(kRequests, std::vector<std::uint8_t>(kTask / 2));
  std::vector<Future> futures;
  for (int i = 0; i < kRequests; ++i) futures.push_back(file->pread(bufs[i].data(), kTask / 2, i * (kTask / 2)));
  for (int i = 0; i < kRequests; ++i) {
    auto r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(bufs[i], testing::pattern(i * (kTask / 2), kTask / 2)) << i;
  }
  EXPECT_EQ(file->report().total_ops(), static_cast<std::uint64_t>(kRequests));
}

TEST(Concurrency, ReportsMayBeReadWhileRequestsRun) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 8 * kTask);
  auto file = File::open(path, "r", config(4));
  ASSERT_TRUE(file.ok());
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      (void)process_report().summary();
      (void)file->report().to_json();
    }
  });
  std::vector<std::uint8_t> buf(8 * kTask);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(file->pread(buf.data(), buf.size(), 0).get().ok());
  stop = true;
  reader.join();
  EXPECT_EQ(file->report().total_ops(), 30u * 8);
}

}  // namespace
}  // namespace ferry
