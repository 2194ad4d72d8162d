// File::pread_batch (issue 21): pieces into host memory read into place, pieces into (fake) device memory
// packed into bounce buffers and moved with one copy per contiguous run, the runs of a fill in one batched
// copy (or a copy each without one); unaligned pieces, pieces across
// task boundaries and past the end of the file, duplicates, empty pieces, thousands of pieces; bad pieces
// refused before any I/O with their index. Every byte checked, and the bytes around each destination.
// Also the engine's sharing: a waiter runs a one-task request itself when the pool is busy, one-task requests
// in flight together run on as many workers, large requests run in the order they came, and a worker reads
// the next op into its other bounce buffer while the last one's copy still runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <latch>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "backends/staging_pool.hpp"
#include "engine/thread_pool.hpp"
#include "ferry/ferry.hpp"
#include "file/file_state.hpp"
#include "file/open_options.hpp"
#include "platform/cuda/primary_context.hpp"
#include "source/source.hpp"
#include "support/busy_pool.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/memory_source.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ::testing::HasSubstr;

namespace ferry {
namespace {

using testing::StatusIs;

constexpr std::uint64_t kTask = 64 * 1024;
constexpr std::uint64_t kFile = 40 * kTask + 777;  // not a whole number of pages
constexpr std::uint8_t kPoison = 0xA5;

class Batch : public ::testing::Test {
 protected:
  void SetUp() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    path_ = testing::write_pattern_file(testing::test_dir() / "data.bin", kFile);
  }
  void TearDown() override {
    detail::process_staging_pool().clear();
    (void)testing::fake_cuda_api().cuCtxSetCurrent(nullptr);
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }

  File open(CompatMode compat = CompatMode::on, Requirement require = Requirement::none) {
    Config c;
    c.set_compat_mode(compat).set_require(require).set_task_size(kTask).set_bounce_buffer_size(kTask).set_threads(3);
    detail::OpenOptions o;
    o.gpu = &testing::fake_gpu_platform();
    auto f = detail::open_file(path_, "r", c, o);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }

  // What piece (size, offset) should read: the pattern up to the end of the file (of `file_bytes`).
  static std::uint64_t expected_bytes(const Piece& p, std::uint64_t file_bytes = kFile) {
    return p.offset >= file_bytes ? 0 : std::min(p.size, file_bytes - p.offset);
  }

  // Checks each piece's bytes against the file (of `file_bytes`) and that nothing around them changed;
  // `memory` holds every piece's destination, with poison bytes around them.
  static ::testing::AssertionResult holds(const std::vector<Piece>& pieces, const std::uint8_t* memory,
                                          std::uint64_t memory_bytes, std::uint64_t file_bytes = kFile) {
    std::vector<bool> covered(memory_bytes, false);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const auto* at = static_cast<const std::uint8_t*>(pieces[i].buffer);
      const std::uint64_t n = expected_bytes(pieces[i], file_bytes);
      for (std::uint64_t k = 0; k < n; ++k) {
        if (at[k] != testing::pattern_byte(pieces[i].offset + k)) {
          return ::testing::AssertionFailure() << "piece " << i << " byte " << k << " is wrong";
        }
        covered[static_cast<std::size_t>(at - memory) + k] = true;
      }
    }
    for (std::uint64_t k = 0; k < memory_bytes; ++k) {
      if (!covered[k] && memory[k] != kPoison) {
        return ::testing::AssertionFailure() << "byte " << k << " of the memory, outside every piece read, changed";
      }
    }
    return ::testing::AssertionSuccess();
  }

  // Pieces of every awkward kind, each with its own destination in `memory` (gap bytes between).
  static std::vector<Piece> awkward_pieces(std::uint8_t* memory, std::uint64_t* used, std::size_t count) {
    std::mt19937_64 rng(21);
    std::vector<Piece> pieces;
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < count; ++i) {
      std::uint64_t size = 0, offset = 0;
      switch (i % 6) {
        case 0: size = 4096; offset = (rng() % (kFile / 4096)) * 4096; break;     // aligned
        case 1: size = 1 + rng() % 5000; offset = rng() % kFile; break;           // unaligned
        case 2: size = kTask + 4096; offset = kTask - 100; break;                 // across task boundaries
        case 3: size = 9000; offset = kFile - 1000; break;                        // across the end
        case 4: size = 0; offset = 123; break;                                    // empty
        case 5: size = 4096; offset = 8192; break;                                // a duplicate
      }
      pieces.push_back(Piece{memory + at, size, offset});
      at += size + 64;
    }
    *used = at;
    return pieces;
  }

  // A File on the fake GPU over `pages` pages of the pattern in memory; the source takes whatever batch a
  // worker hands it and records the largest (memory_->largest_batch).
  File memory_file(std::size_t pages, unsigned threads, std::uint64_t bounce_buffer_size,
                   const detail::GpuPlatform& gpu = testing::fake_gpu_platform()) {
    Config c;
    c.set_compat_mode(CompatMode::on).set_bounce_buffer_size(bounce_buffer_size).set_threads(threads);
    return open_memory(pages, c, gpu, /*depth=*/4096);
  }

  // The File of memory_file() or large_read_file(): `pages` pages of the pattern in memory_ (of queue depth
  // `depth`), opened with `c`.
  File open_memory(std::size_t pages, const Config& c, const detail::GpuPlatform& gpu, std::size_t depth = 1) {
    memory_ = std::make_shared<testing::MemorySource>("memory", testing::pattern(0, pages * 4096));
    memory_->depth = depth;
    detail::OpenOptions o;
    o.gpu = &gpu;
    auto f = detail::open_source(memory_, "r", c, o);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }

  // Page pieces into poisoned fake device memory (one page more than they fill): piece i reads page
  // page_of(i) into the i-th page.
  struct DevicePages {
    std::uint8_t* dev = nullptr;
    std::vector<Piece> pieces;
  };
  static DevicePages device_pages(std::size_t count, const std::function<std::uint64_t(std::size_t)>& page_of) {
    DevicePages d;
    d.dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device((count + 1) * 4096));
    std::memset(d.dev, kPoison, (count + 1) * 4096);
    for (std::size_t i = 0; i < count; ++i) d.pieces.push_back(Piece{d.dev + i * 4096, 4096, page_of(i) * 4096});
    return d;
  }

  // A File on the fake GPU over `pages` pages of the pattern in memory whose reads are split into tasks of
  // kTask, each a bounce buffer: a large read of several tasks, one task a take.
  File large_read_file(std::size_t pages, unsigned threads) {
    Config c;
    c.set_compat_mode(CompatMode::on).set_task_size(kTask).set_bounce_buffer_size(kTask).set_threads(threads);
    return open_memory(pages, c, testing::fake_gpu_platform());
  }

  // A large read's poisoned fake device memory: the read lands at dev + 4096, a page of poison either side.
  struct LargeRead {
    std::uint8_t* dev = nullptr;
    std::uint64_t bytes = 0, offset = 0;
  };
  static LargeRead large_read(std::uint64_t bytes, std::uint64_t offset) {
    LargeRead r{static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(bytes + 2 * 4096)), bytes, offset};
    std::memset(r.dev, kPoison, bytes + 2 * 4096);
    return r;
  }
  // Whether `read` holds the pattern at its offset for its bytes and its poison either side is untouched.
  static ::testing::AssertionResult lands(const LargeRead& read) {
    const std::uint64_t bytes = read.bytes;
    for (std::uint64_t k = 0; k < bytes + 2 * 4096; ++k) {
      const bool inside = k >= 4096 && k < 4096 + bytes;
      const std::uint8_t want = inside ? testing::pattern_byte(read.offset + k - 4096) : kPoison;
      if (read.dev[k] != want) {
        return ::testing::AssertionFailure() << "byte " << k << " of the read at offset " << read.offset
                                             << (inside ? " is wrong" : ", outside it, changed");
      }
    }
    return ::testing::AssertionSuccess();
  }

  std::string path_;
  std::shared_ptr<testing::MemorySource> memory_;
};

TEST_F(Batch, HostPiecesLandInPlaceAndNothingElseChanges) {
  File f = open();
  std::vector<std::uint8_t> memory(16 << 20, kPoison);
  std::uint64_t used = 0;
  auto pieces = awkward_pieces(memory.data(), &used, 600);
  ASSERT_LE(used, memory.size());
  auto r = f.pread_batch(pieces).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::uint64_t want = 0;
  for (const auto& p : pieces) want += expected_bytes(p);
  EXPECT_EQ(r->bytes, want);
  EXPECT_EQ(r->report.at(Route::host).ops, r->report.total_ops());
  EXPECT_TRUE(holds(pieces, memory.data(), memory.size()));
}

TEST_F(Batch, DevicePiecesArePackedAndMovedOneCopyPerRun) {
  File f = open();
  // The data-loader form: piece i of 4 KiB at a random offset lands at dst[i * 4096].
  constexpr std::size_t kPieces = 3000;
  auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(kPieces * 4096 + 4096));
  std::memset(dev, kPoison, kPieces * 4096 + 4096);
  std::mt19937_64 rng(5);
  std::vector<Piece> pieces;
  for (std::size_t i = 0; i < kPieces; ++i) pieces.push_back(Piece{dev + i * 4096, 4096, (rng() % (kFile / 4096)) * 4096});
  auto r = f.pread_batch(pieces).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kPieces * 4096);
  EXPECT_EQ(r->report.at(Route::staged).ops, kPieces) << "every piece is one operation";
  EXPECT_TRUE(holds(pieces, dev, kPieces * 4096 + 4096));
  // 16 pieces of 4 KiB fill a 64 KiB bounce buffer: about kPieces / 16 copies, never one per piece.
  EXPECT_LE(testing::fake_cuda_counters().htod_async_copies, kPieces / 16 + 3 * 3);
  testing::fake_cuda_free(dev);
}

// A batch smaller than the workers' bounce buffers would fill is shared among them: each takes its share
// of the pieces, not one buffer's worth (which left most workers idle).
TEST_F(Batch, EveryWorkerTakesItsShareOfASmallBatch) {
  constexpr std::size_t kPieces = 64;
  File f = memory_file(kPieces, 4, 1 << 20);  // 256 pieces per fill
  auto [dev, pieces] = device_pages(kPieces, [](std::size_t i) { return kPieces - 1 - i; });
  auto r = f.pread_batch(pieces).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_LE(memory_->largest_batch, kPieces / 4) << "one worker took more than its share of 64 pieces over 4 threads";
  EXPECT_TRUE(holds(pieces, dev, (kPieces + 1) * 4096, kPieces * 4096));
  testing::fake_cuda_free(dev);
}

// A worker's share is one fill and one copy where the destinations follow one another (fewer, larger
// copies: splitting shares into fills that overlap their copies was slower on the H200, batch.cpp says why):
// 4,096 pieces of 4 KiB over 4 threads are 4 shares of 1,024 pieces, 4 MiB each.
TEST_F(Batch, AWorkersShareIsOneFillAndOneCopy) {
  constexpr std::size_t kPieces = 4096;
  File f = memory_file(kPieces, 4, 4 << 20);  // 1,024 pieces a buffer
  auto [dev, pieces] = device_pages(kPieces, [](std::size_t i) { return (i * 7) % kPieces; });
  const std::uint64_t copies_before = testing::fake_cuda_counters().htod_async_copies;
  auto r = f.pread_batch(pieces).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->report.total_ops(), kPieces) << "every piece counted";
  EXPECT_EQ(memory_->largest_batch, kPieces / 4) << "a worker's share in one fill";
  EXPECT_EQ(testing::fake_cuda_counters().htod_async_copies - copies_before, 4u) << "one copy per share";
  EXPECT_TRUE(holds(pieces, dev, (kPieces + 1) * 4096, kPieces * 4096));
  testing::fake_cuda_free(dev);
}

// Two batches in flight, as a data loader prefetches: a worker that goes from the first batch's pieces to the
// second's first retires what it read of the first (waiting for those copies), so the first completes while
// the second is still being read. (Before, a worker retired its takes of the first only once its copies were
// seen done between later takes, or once it ran out of work: with the second batch's reads held up, the first
// never completed.)
TEST_F(Batch, ABatchCompletesWhileTheNextOneIsStillBeingRead) {
  using namespace std::chrono;
  testing::fake_cuda_script().copy_mode = testing::FakeCopyMode::deferred;  // a copy lands when waited for
  constexpr std::size_t kPieces = 64;
  File f = memory_file(2 * kPieces, 2, 16 * 4096);  // 2 workers, 16 pieces a fill
  std::latch second_may_read(1);
  memory_->before_read = [&](const detail::Task& t) {
    if (t.file_offset >= kPieces * 4096) second_may_read.wait();
  };
  auto first = device_pages(kPieces, [](std::size_t i) { return i; });
  auto second = device_pages(kPieces, [](std::size_t i) { return kPieces + i; });
  Future a = f.pread_batch(first.pieces);
  Future b = f.pread_batch(second.pieces);
  const bool first_done = a.wait_for(seconds(5));
  second_may_read.count_down();
  EXPECT_TRUE(first_done) << "the first batch waited for the second's reads";
  for (auto* batch : {&a, &b}) {
    auto r = batch->get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, kPieces * 4096);
  }
  EXPECT_TRUE(holds(first.pieces, first.dev, (kPieces + 1) * 4096, 2 * kPieces * 4096));
  EXPECT_TRUE(holds(second.pieces, second.dev, (kPieces + 1) * 4096, 2 * kPieces * 4096));
  testing::fake_cuda_free(first.dev);
  testing::fake_cuda_free(second.dev);
}

// Pieces whose destinations do not follow one another (each piece landing one page below the one before)
// still move with one driver call a fill: one batched copy of 1,024 copies, not 1,024 copy launches.
TEST_F(Batch, ScatteredDevicePiecesMoveInOneBatchedCopyAFill) {
  constexpr std::size_t kPieces = 4096;
  File f = memory_file(kPieces, 4, 4 << 20);  // 1,024 pieces a buffer
  auto [dev, pieces] = device_pages(kPieces, [](std::size_t i) { return (i * 7) % kPieces; });
  std::reverse(pieces.begin(), pieces.end());
  const testing::FakeCudaCounters before = testing::fake_cuda_counters();
  auto r = f.pread_batch(pieces).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const testing::FakeCudaCounters after = testing::fake_cuda_counters();
  EXPECT_EQ(r->report.total_ops(), kPieces) << "every piece counted";
  EXPECT_EQ(after.batched_copy_calls - before.batched_copy_calls, 4u) << "one driver call a share";
  EXPECT_EQ(after.batched_copies - before.batched_copies, kPieces) << "a copy for each piece, in those calls";
  EXPECT_EQ(after.htod_async_copies - before.htod_async_copies, 0u) << "no copy launched alone";
  EXPECT_TRUE(holds(pieces, dev, (kPieces + 1) * 4096, kPieces * 4096));
  testing::fake_cuda_free(dev);
}

// A driver older than CUDA 13 has no batched copy: the same pieces then move with a copy each, as exactly.
TEST_F(Batch, WithoutBatchedCopiesScatteredPiecesMoveWithACopyEach) {
  constexpr std::size_t kPieces = 256;
  const detail::GpuPlatform& older = testing::fake_gpu_platform_without_batched_copies();
  File f = memory_file(kPieces, 4, 4 << 20, older);
  auto [dev, pieces] = device_pages(kPieces, [](std::size_t i) { return (i * 7) % kPieces; });
  std::reverse(pieces.begin(), pieces.end());
  const testing::FakeCudaCounters before = testing::fake_cuda_counters();
  auto r = f.pread_batch(pieces).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const testing::FakeCudaCounters after = testing::fake_cuda_counters();
  EXPECT_EQ(after.batched_copy_calls - before.batched_copy_calls, 0u);
  EXPECT_EQ(after.htod_async_copies - before.htod_async_copies, kPieces);
  EXPECT_TRUE(holds(pieces, dev, (kPieces + 1) * 4096, kPieces * 4096));
  testing::fake_cuda_free(dev);
}

// A batched copy the driver refuses fails the batch with the driver's error and what was being copied.
TEST_F(Batch, AFailedBatchedCopyFailsTheBatchSayingWhatItCopied) {
  constexpr std::size_t kPieces = 64;
  File f = memory_file(kPieces, 1, 4 << 20);
  auto [dev, pieces] = device_pages(kPieces, [](std::size_t i) { return i; });
  std::reverse(pieces.begin(), pieces.end());
  testing::fake_cuda_script().fail("cuMemcpyBatchAsync_v2", detail::CUDA_ERROR_ILLEGAL_ADDRESS);
  auto r = f.pread_batch(pieces).get();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("batched copies"));
  EXPECT_THAT(r.status().message(), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  testing::fake_cuda_free(dev);
}

// A request starts no more workers than its takes fill: 17 pieces over 16 threads are shares of 2, 9 takes,
// so at most 9 workers, each setting up staging and waiting for its stream once (a worker that comes back
// for a second take keeps its staging); 16 were made once, 7 of them to find nothing left.
TEST_F(Batch, OnlyTheWorkersTheTakesFillAreSetUp) {
  constexpr std::size_t kPieces = 17;
  File f = memory_file(kPieces, 16, 1 << 20);
  auto [dev, pieces] = device_pages(kPieces, [](std::size_t i) { return kPieces - 1 - i; });
  // A finish waits for its stream until a query finds it idle: one such query a finish.
  auto finishes = [] { return testing::fake_cuda_counters().idle_stream_queries; };
  const std::uint64_t finishes_before = finishes();
  auto r = f.pread_batch(pieces).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->report.total_ops(), kPieces) << "every piece counted";
  EXPECT_LE(memory_->largest_batch, 2u) << "a share of 17 pieces over 16 threads";
  EXPECT_LE(finishes() - finishes_before, 9u) << "at most one worker (and one finish) a take";
  EXPECT_GE(finishes() - finishes_before, 1u);
  EXPECT_TRUE(holds(pieces, dev, (kPieces + 1) * 4096, kPieces * 4096));
  testing::fake_cuda_free(dev);
}

TEST_F(Batch, AwkwardDevicePiecesStayExact) {
  File f = open();
  constexpr std::uint64_t kMemory = 24 << 20;
  auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(kMemory));
  std::memset(dev, kPoison, kMemory);
  std::uint64_t used = 0;
  auto pieces = awkward_pieces(dev, &used, 1200);
  ASSERT_LE(used, kMemory);
  auto r = f.pread_batch(pieces).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(holds(pieces, dev, kMemory));
  testing::fake_cuda_free(dev);
}

TEST_F(Batch, ContiguousPiecesAcrossTheEndOfTheFileCopyOnlyWhatWasRead) {
  File f = open();
  constexpr std::size_t kPieces = 8;
  auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(kPieces * 4096));
  std::memset(dev, kPoison, kPieces * 4096);
  std::vector<Piece> pieces;
  for (std::size_t i = 0; i < kPieces; ++i) pieces.push_back(Piece{dev + i * 4096, 4096, kFile - 5 * 4096 + i * 4096});
  auto r = f.pread_batch(pieces).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(holds(pieces, dev, kPieces * 4096)) << "bytes past the end of the file reached the buffer";
  testing::fake_cuda_free(dev);
}

TEST_F(Batch, CuFileRoutesGiveWayToPackingAndRequireGdsRefuses) {
  auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(16 * 4096));
  std::vector<Piece> pieces;
  for (int i = 0; i < 16; ++i) pieces.push_back(Piece{dev + i * 4096, 4096, static_cast<std::uint64_t>(i) * 8192});
  {
    File f = open(CompatMode::off);
    auto r = f.pread_batch(pieces).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->report.reasons.size(), 1u);
    EXPECT_EQ(r->report.reasons[0].reason, Reason::batch_pieces);
  }
  {
    File f = open(CompatMode::off, Requirement::gds);
    EXPECT_THAT(f.pread_batch(pieces).get().status(),
                StatusIs(ErrorCode::failed_precondition, HasSubstr("no I/O was done")));
  }
  testing::fake_cuda_free(dev);
}

TEST_F(Batch, BadPiecesAreRefusedBeforeAnyIoNamingTheirIndex) {
  File f = open();
  std::vector<std::uint8_t> host(8 * 4096, kPoison);
  std::vector<Piece> pieces;
  for (int i = 0; i < 8; ++i) pieces.push_back(Piece{host.data() + i * 4096, 4096, 0});
  pieces[5].buffer = nullptr;
  EXPECT_THAT(f.pread_batch(pieces).get().status(),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("piece 5 of a batch of 8")));
  pieces[5].buffer = host.data();
  pieces[6].offset = ~0ull - 10;
  EXPECT_THAT(f.pread_batch(pieces).get().status(), StatusIs(ErrorCode::invalid_argument, HasSubstr("piece 6")));
  EXPECT_EQ(host, std::vector<std::uint8_t>(8 * 4096, kPoison)) << "I/O was done before the refusal";
  // Device pieces and a host piece among them.
  pieces[6].offset = 0;
  auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(8 * 4096));
  for (int i = 0; i < 8; ++i) pieces[i].buffer = dev + i * 4096;
  pieces[3].buffer = host.data();
  EXPECT_THAT(f.pread_batch(pieces).get().status(),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("piece 3 of a batch of 8")));
  // Behind empty pieces: the index and the count are still the batch's own.
  pieces[0].size = pieces[1].size = 0;
  EXPECT_THAT(f.pread_batch(pieces).get().status(),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("piece 3 of a batch of 8 reading")));
  EXPECT_THAT(f.pread_batch(pieces).get().status(),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("but piece 2 is device memory of GPU 0")));
  EXPECT_EQ(f.report().total_ops(), 0u);
  testing::fake_cuda_free(dev);
}

TEST_F(Batch, AnEmptyBatchIsDone) {
  File f = open();
  auto r = f.pread_batch({}).get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 0u);
}

// ---- The engine shared by requests ----

TEST_F(Batch, ASmallRequestDoesNotWaitForALargeOneToDrain) {
  path_ = testing::write_pattern_file(testing::test_dir() / "large.bin", 128ull << 20);
  File f = open();
  std::vector<std::uint8_t> large(128ull << 20), small(4096);
  Future big = f.pread(large.data(), large.size(), 0);
  Future little = f.pread(small.data(), small.size(), 12345);
  ASSERT_THAT(little.get().status(), StatusIs(ErrorCode::ok));
  EXPECT_FALSE(big.done()) << "the small request waited for the large one's 2048 tasks";
  ASSERT_THAT(big.get().status(), StatusIs(ErrorCode::ok));
  EXPECT_EQ(small, testing::pattern(12345, 4096));
}

// Copies on the fake GPU held up until let_go(): the device runs its queued work on a thread of its own
// (autonomous) through one hardware queue, where a stream waits for a word in host memory first, so that every
// copy queued after that wait waits too.
class HeldCopies {
 public:
  HeldCopies() {
    testing::fake_cuda_script().device_mode = testing::FakeDeviceMode::autonomous;
    testing::fake_cuda_script().hardware_queues = 1;  // every stream behind the held one
    const detail::CudaApi& api = testing::fake_cuda_api();
    void* word = nullptr;
    if (!detail::make_current(api, 0).ok() || api.cuStreamCreate(&stream_, 0) != detail::CUDA_SUCCESS ||
        api.cuMemHostAlloc(&word, 4096, detail::kMemHostAllocDeviceMap) != detail::CUDA_SUCCESS) {
      return;
    }
    go_ = static_cast<std::atomic<std::uint32_t>*>(word);
    go_->store(0);
    holding_ = api.cuStreamWaitValue32_v2(stream_, reinterpret_cast<detail::CUdeviceptr>(word), 1, 0) ==
               detail::CUDA_SUCCESS;
  }
  HeldCopies(const HeldCopies&) = delete;
  HeldCopies& operator=(const HeldCopies&) = delete;
  ~HeldCopies() {
    const detail::CudaApi& api = testing::fake_cuda_api();
    let_go();
    if (stream_ != nullptr) {
      EXPECT_EQ(api.cuStreamSynchronize(stream_), detail::CUDA_SUCCESS);
      EXPECT_EQ(api.cuStreamDestroy_v2(stream_), detail::CUDA_SUCCESS);
    }
    if (go_ != nullptr) {
      EXPECT_EQ(api.cuMemFreeHost(go_), detail::CUDA_SUCCESS);
    }
  }

  bool holding() const { return holding_; }
  void let_go() {
    if (go_ != nullptr) go_->store(1);
  }

 private:
  detail::CUstream stream_ = nullptr;
  std::atomic<std::uint32_t>* go_ = nullptr;
  bool holding_ = false;
};

// A worker keeps its staging between ops: while the copy of one read is held up it reads the next into its
// other bounce buffer. One worker; three one-task reads; a GPU whose copies queue behind another stream's unmet
// wait: the worker reads B while A's copy is held up (and, both buffers in use, waits for A's before C), and
// all land exactly once they are let go.
TEST_F(Batch, AWorkerReadsTheNextReadWhileTheLastOnesCopyIsHeldUp) {
  HeldCopies held;
  ASSERT_TRUE(held.holding());

  constexpr std::uint64_t kRead = kTask;  // one op: one bounce buffer of the worker's two
  File f = large_read_file(3 * kRead / 4096, /*threads=*/1);
  std::vector<LargeRead> reads;
  for (std::uint64_t k = 0; k < 3; ++k) reads.push_back(large_read(kRead, k * kRead));
  std::array<Future, 3> futures;
  std::atomic<bool> b_read{false}, a_done_when_b_read{false}, c_read{false};
  memory_->before_read = [&](const detail::Task& t) {
    if (t.file_offset >= 2 * kRead) c_read = true;
    if (t.file_offset < kRead || b_read.load()) return;
    a_done_when_b_read = futures[0].done();
    b_read = true;
  };
  testing::BusyPool busy;
  for (std::size_t k = 0; k < 3; ++k) futures[k] = f.pread(reads[k].dev + 4096, kRead, reads[k].offset);
  // A is left to its submitter for a moment (kSubmitterRunsGrace, 50 us: the sleep must outlast it); once that
  // is over, the worker takes the three in order.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  busy.release_one();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!b_read.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(b_read.load()) << "the worker waited for A's copy before reading B";
  EXPECT_FALSE(a_done_when_b_read.load()) << "A was done before its copy ran";
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(c_read.load()) << "C was read into a bounce buffer whose copy had not run";
  held.let_go();
  for (auto& future : futures) {
    auto r = future.get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, kRead);
  }
  busy.release();
  for (const auto& read : reads) EXPECT_TRUE(lands(read));
  for (const auto& read : reads) testing::fake_cuda_free(read.dev);
}

// Large reads in flight from two threads, each copy done only once asked about, so that jobs end while their
// copies still run and others wait (their ends parked): every byte lands, nothing around the reads changes,
// and every bounce buffer comes back (the per-test leak check).
TEST_F(Batch, LargeReadsInFlightWhoseEndsWaitForTheirCopiesLandExactly) {
  testing::fake_cuda_script().copy_mode = testing::FakeCopyMode::deferred;
  constexpr std::uint64_t kPages = 256, kInFlight = 4, kRounds = 6;
  File f = large_read_file(kPages, /*threads=*/2);
  auto reader = [&](unsigned seed) {
    std::mt19937_64 rng(seed);
    for (std::size_t round = 0; round < kRounds; ++round) {
      std::vector<LargeRead> reads;
      std::vector<Future> live;
      for (std::size_t k = 0; k < kInFlight; ++k) {
        const std::uint64_t bytes = (2 + rng() % 6) * kTask - rng() % 3000;  // 2-7 tasks, the last one short
        reads.push_back(large_read(bytes, rng() % (kPages * 4096 - bytes)));
        live.push_back(f.pread(reads.back().dev + 4096, bytes, reads.back().offset));
      }
      for (std::size_t k = 0; k < kInFlight; ++k) {
        auto r = live[k].get();
        EXPECT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_TRUE(lands(reads[k]));
        testing::fake_cuda_free(reads[k].dev);
      }
    }
  };
  std::thread other(reader, 1);
  reader(2);
  other.join();
}

// A read-only source of `bytes` whose reads fill their destination with 0x5A, each after the subclass's
// before_read().
class FillingSource : public detail::Source {
 public:
  FillingSource(std::string name, std::uint64_t bytes) : name_(std::move(name)), bytes_(bytes) {}
  const std::string& name() const override { return name_; }
  Result<detail::Extent> extent() const override { return detail::Extent{true, bytes_}; }
  std::uint64_t task_alignment() const override { return 1; }
  Result<std::uint64_t> read(const detail::SourceRequest&, const detail::Task& t, void* dst, const char*,
                             Report&) override {
    before_read(t);
    std::memset(dst, 0x5A, t.length);
    return t.length;
  }
  Status write(const detail::SourceRequest&, const detail::Task&, const void*, const char*, Report&) override {
    return Status(ErrorCode::failed_precondition, "read-only");
  }
  Status sync() override { return Status(); }
  const std::string& open_note() const override { return note_; }
  Status close() override { return Status(); }

 protected:
  virtual void before_read(const detail::Task& t) = 0;

 private:
  const std::string name_, note_;
  const std::uint64_t bytes_;
};

// A source whose reads each wait until `together` of them run at once: reads that run one after another
// never pass it.
class GatedSource final : public FillingSource {
 public:
  explicit GatedSource(std::ptrdiff_t together) : FillingSource("gated", 1 << 20), gate_(together) {}

 private:
  void before_read(const detail::Task&) override { gate_.arrive_and_wait(); }
  std::latch gate_;
};

// As GatedSource, but a read that waits longer than `patience` for the others gives up and is counted: a test
// of many rounds then fails where one round would hang.
class PatientGatedSource final : public FillingSource {
 public:
  PatientGatedSource(unsigned together, std::chrono::milliseconds patience)
      : FillingSource("patient gate", 1 << 20), together_(together), patience_(patience) {}
  unsigned gave_up() const { return gave_up_.load(); }

 private:
  void before_read(const detail::Task&) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++arrived_;
    all_.notify_all();
    if (!all_.wait_for(lock, patience_, [this] { return arrived_ >= together_; })) ++gave_up_;
  }
  const unsigned together_;
  const std::chrono::milliseconds patience_;
  std::mutex mutex_;
  std::condition_variable all_;
  unsigned arrived_ = 0;  // guarded by mutex_
  std::atomic<unsigned> gave_up_{0};
};

// A source whose reads each take `read_time`, noted by their offsets in the order they begin.
class OrderedSource final : public FillingSource {
 public:
  OrderedSource(std::uint64_t bytes, std::chrono::microseconds read_time)
      : FillingSource("ordered", bytes), read_time_(read_time) {}
  std::vector<std::uint64_t> begun() {
    std::lock_guard<std::mutex> lock(mutex_);
    return begun_;
  }

 private:
  void before_read(const detail::Task& t) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      begun_.push_back(t.file_offset);
    }
    std::this_thread::sleep_for(read_time_);
  }
  const std::chrono::microseconds read_time_;
  std::mutex mutex_;
  std::vector<std::uint64_t> begun_;
};

// Ops are taken in the order they came: two large requests that need every worker run one after the other, so
// the first is not held back by the second.
TEST(EngineSharing, LargeRequestsThatNeedEveryWorkerRunInTheOrderTheyCame) {
  // As many threads as the pool has workers (it never shrinks, and earlier tests may have grown it): the first
  // request's ops take every worker, and each runs 16 reads of 200 us.
  const auto workers = static_cast<unsigned>(std::max<std::size_t>(2, detail::shared_pool().workers()));
  constexpr std::uint64_t kTask = 4096;
  const std::uint64_t bytes = 16ull * workers * kTask;
  Config c;
  c.set_threads(workers).set_task_size(kTask);
  auto source = std::make_shared<OrderedSource>(2 * bytes, std::chrono::microseconds(200));
  auto f = detail::open_source(source, "r", c, detail::OpenOptions{});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> first(bytes), second(bytes);
  Future a = f->pread(first.data(), bytes, 0);
  Future b = f->pread(second.data(), bytes, bytes);
  ASSERT_THAT(a.get().status(), StatusIs(ErrorCode::ok));
  ASSERT_THAT(b.get().status(), StatusIs(ErrorCode::ok));
  EXPECT_EQ(first, std::vector<std::uint8_t>(bytes, 0x5A));
  EXPECT_EQ(second, first);
  // The second request's reads that began before the first one's last read did. In order, only reads of
  // workers whose first-request job ended while others still read (at most one a worker, unless a worker is
  // held off its core between taking its last task and reading it); taking turns, about half of them (all of
  // them in five runs of the old rule).
  const auto begun = source->begun();
  ASSERT_EQ(begun.size(), 2 * bytes / kTask);
  std::size_t last_of_first = 0;
  for (std::size_t i = 0; i < begun.size(); ++i) {
    if (begun[i] < bytes) last_of_first = i;
  }
  const auto overtaking = std::count_if(begun.begin(), begun.begin() + static_cast<std::ptrdiff_t>(last_of_first),
                                        [&](std::uint64_t offset) { return offset >= bytes; });
  EXPECT_LT(static_cast<std::size_t>(overtaking), 4u * workers)
      << "the second request took turns with the first: " << overtaking << " of its " << bytes / kTask
      << " reads began before the first one's last";
}

TEST(EngineSharing, OneTaskRequestsInFlightSpreadOverTheWorkers) {
  // With too few workers the reads would wait for one another forever: the per-test watchdog fails it.
  // More reads at once than the pool has workers now (the pool is the process's, and never shrinks).
  const unsigned together = static_cast<unsigned>(detail::shared_pool().workers()) + 4;
  Config c;
  c.set_threads(together);
  auto f = detail::open_source(std::make_shared<GatedSource>(together), "r", c, detail::OpenOptions{});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::vector<std::uint8_t>> buffers(together, std::vector<std::uint8_t>(4096));
  std::vector<Future> live;
  for (unsigned i = 0; i < together; ++i) live.push_back(f->pread(buffers[i].data(), 4096, i * 4096ull));
  for (auto& fut : live) ASSERT_THAT(fut.get().status(), StatusIs(ErrorCode::ok));
  for (const auto& b : buffers) EXPECT_EQ(b, std::vector<std::uint8_t>(4096, 0x5A));
}

// The same, round after round on new Files: the test above once hung under ThreadSanitizer, and this failed in
// every run while a submit's wake could reach the pool's clock-watching worker, which then took a job whose
// grace had ended and left the ready drainer job beside an idle worker.
TEST(EngineSharing, EveryOneTaskReadInFlightFindsADrainerRoundAfterRound) {
  const unsigned together = static_cast<unsigned>(detail::shared_pool().workers()) + 4;
  Config c;
  c.set_threads(together);
  for (int round = 0; round < 40; ++round) {
    auto source = std::make_shared<PatientGatedSource>(together, std::chrono::milliseconds(2000));
    auto f = detail::open_source(source, "r", c, detail::OpenOptions{});
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    std::vector<std::vector<std::uint8_t>> buffers(together, std::vector<std::uint8_t>(4096));
    std::vector<Future> live;
    for (unsigned i = 0; i < together; ++i) live.push_back(f->pread(buffers[i].data(), 4096, i * 4096ull));
    for (auto& fut : live) ASSERT_THAT(fut.get().status(), StatusIs(ErrorCode::ok));
    ASSERT_EQ(source->gave_up(), 0u) << "round " << round << ": a read waited 2 s for the other " << together - 1
                                     << ", one of which had no drainer";
    for (const auto& b : buffers) ASSERT_EQ(b, std::vector<std::uint8_t>(4096, 0x5A));
  }
}

TEST_F(Batch, AWaiterRunsAOneTaskRequestItselfWhenThePoolIsBusy) {
  File f = open();
  testing::BusyPool busy;
  std::vector<std::uint8_t> out(4096);
  auto r = f.pread(out.data(), out.size(), 8192).get();  // every worker is busy: the caller runs it
  busy.release();
  ASSERT_THAT(r.status(), StatusIs(ErrorCode::ok));
  EXPECT_EQ(out, testing::pattern(8192, 4096));
}

// wait() runs a one-task request on the caller's thread: every worker is busy here, so nobody else could have
// run it; its callback runs there too. A larger one is left to the workers.
TEST_F(Batch, WaitRunsAOneTaskRequestOnTheCallersThreadAndOnlySuch) {
  Config c;
  c.set_threads(1).set_task_size(4096);
  auto f = detail::open_file(path_, "r", c, detail::OpenOptions{});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  testing::BusyPool busy;
  std::vector<std::uint8_t> one(4096), three(3 * 4096);
  std::atomic<int> hooks{0};
  Future small = f->pread(one.data(), one.size(), 8192);
  small.then([&hooks](const Result<Transfer>&) { ++hooks; });
  small.wait();
  EXPECT_EQ(hooks.load(), 1) << "its callback runs on the thread that ran it";
  Future large = f->pread(three.data(), three.size(), 0);  // three tasks: left to the pool
  EXPECT_FALSE(large.wait_for(std::chrono::milliseconds(20)));
  busy.release();
  ASSERT_THAT(small.get().status(), StatusIs(ErrorCode::ok));
  ASSERT_THAT(large.get().status(), StatusIs(ErrorCode::ok));
  EXPECT_EQ(one, testing::pattern(8192, 4096));
  EXPECT_EQ(three, testing::pattern(0, 3 * 4096));
}

}  // namespace
}  // namespace ferry
