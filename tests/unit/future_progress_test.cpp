// Future::bytes_done: progress for long requests.
#include <gtest/gtest.h>

#include "ferry/ferry.hpp"
#include "support/test_files.hpp"

namespace ferry {
namespace {

TEST(FutureProgress, CountsFinishedTasksAndEndsAtTheTotal) {
  auto dir = testing::test_dir();
  const std::uint64_t size = 40 * 64 * 1024 + 5;
  auto path = testing::write_pattern_file(dir / "d.bin", size);
  Config c;
  c.set_task_size(64 * 1024).set_threads(2);
  auto file = File::open(path, "r", c);
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(size);
  Future f = file->pread(buf.data(), size, 0);
  std::uint64_t seen = f.bytes_done();
  EXPECT_LE(seen, size);
  f.wait();
  EXPECT_EQ(f.bytes_done(), size);
  auto r = f.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, size);
  EXPECT_EQ(Future().bytes_done(), 0u);
}

}  // namespace
}  // namespace ferry
