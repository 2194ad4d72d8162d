// Issue 15 through the seam: ferry::File opened by URL (nginx on loopback). The host route reads the object
// into host memory and the staged route into (fake) GPU memory, byte-exact with nothing written past the
// count; cuFile is never asked; writes are refused; the report says what the remote reads cost.
#include <cstring>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "backends/staging_pool.hpp"
#include "ferry/file.hpp"
#include "file/open_options.hpp"
#include "remote/servers.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace ferry {
namespace {

constexpr std::uint64_t kSize = 5 * (1 << 20) + 777;

class RemoteFile : public ::testing::Test {
 protected:
  void SetUp() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    dir_ = testing::test_dir();
    std::filesystem::create_directories(dir_ / "root");
    testing::write_pattern_file(dir_ / "root" / "weights.bin", kSize);
    if (auto why = nginx_.start(dir_ / "root", dir_ / "nginx"); !why.empty()) GTEST_SKIP() << why;
  }
  void TearDown() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }
  Result<File> open(const std::string& url, const char* mode = "r") {
    Config c;
    c.set_task_size(1 << 20).set_bounce_buffer_size(256 << 10).set_threads(4);
    detail::OpenOptions o;
    o.gpu = &testing::fake_gpu_platform();
    return detail::open_file(url, mode, c, o);
  }

  std::filesystem::path dir_;
  testing::NginxServer nginx_;
};

TEST_F(RemoteFile, HostRouteReadsAnHttpObjectByteExact) {
  auto f = open(nginx_.url("/weights.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto size = f->size();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, kSize);
  std::vector<std::uint8_t> buf(kSize + 4096, 0xA5);
  auto r = f->pread(buf.data(), kSize + 100000, 12345).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->bytes, kSize - 12345);
  EXPECT_EQ(std::memcmp(buf.data(), testing::pattern(12345, kSize - 12345).data(), kSize - 12345), 0);
  for (std::uint64_t i = kSize - 12345; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xA5) << "byte " << i;
  EXPECT_EQ(r->report.at(Route::host).bytes, kSize - 12345);
  bool noted = false;
  for (const auto& n : r->report.notes) noted |= n.find("HTTP requests") != std::string::npos;
  EXPECT_TRUE(noted) << r->report.table();
}

TEST_F(RemoteFile, StagedRouteReadsAnHttpObjectIntoGpuMemoryWithoutCuFile) {
  auto f = open(nginx_.url("/weights.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::memset(dev, 0xA5, kSize + 1);
  auto r = f->pread(dev, kSize, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->bytes, kSize);
  EXPECT_EQ(std::memcmp(dev, testing::pattern(0, kSize).data(), kSize), 0);
  EXPECT_EQ(static_cast<std::uint8_t*>(dev)[kSize], 0xA5);
  EXPECT_EQ(r->report.at(Route::staged).bytes, kSize);
  ASSERT_FALSE(r->report.reasons.empty());
  EXPECT_EQ(r->report.reasons.front().reason, Reason::source_not_a_file);
  EXPECT_EQ(testing::fake_cufile_counters().handle_registers, 0u);
  testing::fake_cuda_free(dev);
}

TEST_F(RemoteFile, WritesAndMissingObjectsAreRefusedNamingTheUrl) {
  auto w = open(nginx_.url("/weights.bin"), "w");
  ASSERT_THAT(w, StatusIs(ferry::ErrorCode::failed_precondition));
  EXPECT_NE(w.status().message().find("remote writes are not supported"), std::string::npos) << w.status().to_string();
  auto missing = open(nginx_.url("/nope.bin"));
  ASSERT_THAT(missing, StatusIs(ErrorCode::not_found));
  EXPECT_NE(missing.status().message().find("/nope.bin"), std::string::npos) << missing.status().to_string();
}

}  // namespace
}  // namespace ferry
