// Issue 14: the io_uring engine behind PosixSource. Reads are byte-exact with nothing written past the
// count, buffered and O_DIRECT, and where the kernel refuses io_uring (old kernels, seccomp filters in
// containers) the read still works through pread and the report says why.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ferry/file.hpp"
#include "ferry/page_cache.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace ferry {
namespace {

bool refused(const Report& report) {
  for (const auto& n : report.notes) {
    if (n.find("io_engine=io_uring") != std::string::npos) return true;
  }
  return false;
}

void read_with_uring(DirectIo direct, std::uint64_t size, std::uint64_t offset) {
  auto dir = testing::test_dir();
  std::string path = testing::write_pattern_file(dir / "uring.bin", size);
  Config c;
  c.set_io_engine(IoEngine::io_uring).set_direct_io(direct).set_task_size(4096).set_threads(2);
  auto f = File::open(path, "r", c);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> buf(size + 8192, 0xA5);
  // 4 KiB-aligned memory so that O_DIRECT can take the aligned body.
  auto* at = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(buf.data()) + 4095) & ~std::uintptr_t{4095});
  const std::uint64_t want = size - offset;
  auto r = f->pread(at, want + 5000, offset).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->bytes, want);
  auto expected = testing::pattern(offset, want);
  for (std::uint64_t i = 0; i < want; ++i) ASSERT_EQ(at[i], expected[i]) << "byte " << i;
  for (std::uint8_t* p = at + want; p < buf.data() + buf.size(); ++p) ASSERT_EQ(*p, 0xA5) << "written past the count";
  EXPECT_EQ(r->report.total_bytes(), want) << r->report.table();
  if (refused(r->report)) GTEST_SKIP() << "io_uring refused here, read through pread instead: " << r->report.table();
}

// A batch's pieces go to the ring many more than its depth at a time (a host worker's share, a staged
// worker's bounce buffer of them), kUringDepth in flight. Before, a take of more than 16 was refused as if the
// kernel had refused io_uring, and every later read of the File used pread. Pieces at random offsets, some
// unaligned, some repeated, into slots with poisoned gaps; `evicted`: the file's pages dropped first, so that
// reads that ask the page cache without waiting find nothing and are read again the usual way.
void batch_with_uring(bool evicted) {
  constexpr std::uint64_t kSize = 8 << 20, kPiece = 4096, kGap = 512, kPieces = 1500;
  const std::string path = testing::write_pattern_file(testing::test_dir() / "uring-batch.bin", kSize);
  if (evicted) (void)page_cache::evict(path);
  Config c;
  c.set_io_engine(IoEngine::io_uring).set_threads(2);
  auto f = File::open(path, "r", c);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> memory(kPieces * (kPiece + kGap), 0xA5);
  std::mt19937_64 rng(11);
  std::vector<Piece> pieces;
  for (std::uint64_t i = 0; i < kPieces; ++i) {
    std::uint64_t at = (rng() % (kSize / kPiece - 1)) * kPiece + (i % 7 == 0 ? 333 : 0);
    if (i % 50 == 49) at = pieces[i - 1].offset;  // a duplicate of the one before
    pieces.push_back(Piece{memory.data() + i * (kPiece + kGap), kPiece, at});
  }
  for (int pass = 0; pass < 2; ++pass) {  // the second pass: the pieces' pages are cached now
    auto r = f->pread_batch(pieces).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, kPieces * kPiece);
    for (const std::string& note : r->report.notes) {
      if (note.find("io_engine=io_uring") == std::string::npos) continue;
      if (note.find("not available") != std::string::npos || note.find("io_uring_submit") != std::string::npos) {
        GTEST_SKIP() << "the kernel refused io_uring here: " << note;
      }
      ADD_FAILURE() << "the ring was given up although the kernel allows it: " << note;
    }
    for (std::uint64_t i = 0; i < kPieces; ++i) {
      const std::uint8_t* at = memory.data() + i * (kPiece + kGap);
      ASSERT_EQ(std::vector<std::uint8_t>(at, at + kPiece), testing::pattern(pieces[i].offset, kPiece)) << "piece " << i;
      for (std::uint64_t k = kPiece; k < kPiece + kGap; ++k) ASSERT_EQ(at[k], 0xA5) << "piece " << i << " wrote past itself";
    }
  }
}

TEST(IoUringEngine, ABatchOfThousandsOfHotPiecesIsByteExactThroughTheRing) { batch_with_uring(false); }

TEST(IoUringEngine, ABatchOfPiecesNotCachedIsByteExactThroughTheRing) { batch_with_uring(true); }

TEST(IoUringEngine, BufferedReadsAreByteExact) { read_with_uring(DirectIo::off, (1 << 20) + 77, 0); }

TEST(IoUringEngine, UnalignedStartIsByteExact) { read_with_uring(DirectIo::off, (1 << 20) + 77, 1000); }

TEST(IoUringEngine, DirectReadsAreByteExact) { read_with_uring(DirectIo::on, 2 << 20, 0); }

TEST(IoUringEngine, TheSettingParsesAndShows) {
  Config c;
  ASSERT_TRUE(c.set("FERRY_IO_ENGINE", "io_uring").ok());
  EXPECT_EQ(c.io_engine(), IoEngine::io_uring);
  EXPECT_EQ(c.get("io_engine"), "io_uring");
  Status bad = c.set("io_engine", "aio");
  EXPECT_THAT(bad, StatusIs(ferry::ErrorCode::invalid_argument));
  EXPECT_NE(bad.message().find("io_engine"), std::string::npos) << bad.to_string();
}

}  // namespace
}  // namespace ferry
