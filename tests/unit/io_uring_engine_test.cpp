// Issue 14: the io_uring engine behind PosixSource. Reads are byte-exact with nothing written past the
// count, buffered and O_DIRECT, and where the kernel refuses io_uring (old kernels, seccomp filters in
// containers) the read still works through pread and the report says why.
#include <gtest/gtest.h>

#include <vector>

#include "ferry/file.hpp"
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
