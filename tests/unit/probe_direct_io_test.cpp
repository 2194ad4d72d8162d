// statx DIOALIGN and open(O_DIRECT) on a real file under the build tree. Either outcome is allowed on
// this machine; the two probes must agree with each other.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "platform/probes/direct_io_probe.hpp"
#include "support/test_files.hpp"

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
bool power_of_two(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }
}  // namespace

TEST(DirectIoProbe, DioAlignAgreesWithODirectOpen) {
  fs::path file = ferry::testing::test_dir() / "probe.bin";
  ferry::testing::write_pattern_file(file, 1 << 16);
  DioAlignProbe dio = probe_dio_align(file);
  ODirectOpenProbe od = probe_odirect_open(file);
  EXPECT_FALSE(dio.detail.empty());
  EXPECT_FALSE(od.detail.empty());
  EXPECT_EQ(dio.sys_errno, 0) << dio.detail;
  if (dio.supported && dio.direct_io_allowed()) {
    EXPECT_TRUE(power_of_two(dio.mem_align_bytes)) << dio.mem_align_bytes;
    EXPECT_TRUE(power_of_two(dio.offset_align_bytes)) << dio.offset_align_bytes;
    EXPECT_TRUE(od.opened) << "statx allows direct I/O but " << od.detail;
  }
  if (!od.opened) {
    EXPECT_NE(od.sys_errno, 0);
    if (od.sys_errno == EINVAL) {
      EXPECT_FALSE(dio.direct_io_allowed()) << dio.detail;
    }
  } else {
    EXPECT_EQ(od.sys_errno, 0);
  }
  if (!dio.supported) {
    EXPECT_EQ(dio.mem_align_bytes, 0u);
    EXPECT_EQ(dio.offset_align_bytes, 0u);
  }
}

TEST(DirectIoProbe, MissingFileReportsEnoent) {
  fs::path file = ferry::testing::test_dir() / "absent.bin";
  DioAlignProbe dio = probe_dio_align(file);
  EXPECT_FALSE(dio.supported);
  EXPECT_EQ(dio.sys_errno, ENOENT);
  EXPECT_NE(dio.detail.find("ENOENT"), std::string::npos);
  ODirectOpenProbe od = probe_odirect_open(file);
  EXPECT_FALSE(od.opened);
  EXPECT_EQ(od.sys_errno, ENOENT);
}
