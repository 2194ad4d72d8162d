// ferry::page_cache: residency of a file range and eviction, on the real kernel (cachestat or mincore).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include "ferry/page_cache.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

using ::testing::AnyOf;
using ::testing::HasSubstr;

namespace ferry {
namespace {

TEST(PageCache, AFileJustWrittenIsCachedAndTheRangeIsCutAtItsEnd) {
  std::string path = testing::write_pattern_file(testing::test_dir() / "data.bin", 10 * 4096 + 100);
  auto r = page_cache::residency(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->range_bytes, 10 * 4096 + 100u);
  EXPECT_EQ(r->cached_bytes, r->range_bytes) << "pages just written are in the page cache";
  EXPECT_THAT(r->method, AnyOf("cachestat", "mincore"));
  // Counted in the kernel's pages (64 KiB on some arm64 kernels, where 4 KiB units made hot data look a sixteenth
  // cached, and the mincore mapping's offset invalid).
  EXPECT_EQ(r->page_bytes, static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
  auto part = page_cache::residency(path, 4096, 2 * 4096);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->range_bytes, 2 * 4096u);
  EXPECT_EQ(part->cached_bytes, 2 * 4096u);
  auto tail = page_cache::residency(path, 10 * 4096, 1 << 20);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->range_bytes, 100u);
  EXPECT_EQ(tail->cached_bytes, 100u) << "a page partly in the range is capped at the range";
  auto past = page_cache::residency(path, 1 << 30, 4096);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->range_bytes, 0u);
  EXPECT_EQ(past->fraction(), 1.0);
}

TEST(PageCache, EvictDropsWhatTheKernelCanDrop) {
  std::string path = testing::write_pattern_file(testing::test_dir() / "data.bin", 64 * 4096);
  auto after = page_cache::evict(path);  // fdatasync first: the pages are dirty
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_EQ(after->range_bytes, 64 * 4096u);
  auto again = page_cache::residency(path);
  ASSERT_TRUE(again.ok());
  EXPECT_LE(again->cached_bytes, again->range_bytes);
  if (after->cached_bytes != 0) {
    GTEST_SKIP() << after->cached_bytes << " bytes stayed cached after posix_fadvise(DONTNEED) on this file "
                 << "system (tmpfs or an overlay keeps them): eviction is not observable here";
  }
  EXPECT_EQ(again->cached_bytes, 0u);
}

TEST(PageCache, ErrorsNameThePath) {
  auto missing = page_cache::residency((testing::test_dir() / "missing.bin").string());
  ASSERT_THAT(missing, StatusIs(ErrorCode::not_found));
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.bin"));
  auto dir = page_cache::residency(testing::test_dir().string());
  ASSERT_THAT(dir, StatusIs(ErrorCode::invalid_argument));
  EXPECT_THAT(dir.status().message(), HasSubstr("not a regular file"));
  auto evict_missing = page_cache::evict((testing::test_dir() / "missing.bin").string());
  EXPECT_EQ(evict_missing.status().code(), ErrorCode::not_found);
}

}  // namespace
}  // namespace ferry
