// Issue 14: the byte-source seam. A source is one class (here an in-memory one); the host and staged routes
// serve it unchanged, cuFile is routed around with its own reason, and a source with a queue gets batches.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backends/staging_pool.hpp"
#include "file/open_options.hpp"
#include "platform/gpu_platform.hpp"
#include "route/router.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/memory_source.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace ferry {
namespace {

using testing::MemorySource;

std::vector<std::uint8_t> pattern(std::uint64_t size) {
  std::vector<std::uint8_t> v(size);
  for (std::uint64_t i = 0; i < size; ++i) v[i] = testing::pattern_byte(i);
  return v;
}

class SourceSeam : public ::testing::Test {
 protected:
  void SetUp() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }
  void TearDown() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }
  static Config config(CompatMode compat = CompatMode::automatic) {
    Config c;
    c.set_compat_mode(compat).set_task_size(64 * 1024).set_bounce_buffer_size(16 * 1024).set_threads(4);
    return c;
  }
  File open(std::shared_ptr<MemorySource> source, const char* mode, const Config& c) {
    detail::OpenOptions o;
    o.gpu = &testing::fake_gpu_platform();
    auto f = detail::open_source(std::move(source), mode, c, o);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }
};

constexpr std::uint64_t kSize = (1 << 20) + 123;  // not a multiple of anything the routes use

TEST_F(SourceSeam, HostRouteReadsAnInMemorySource) {
  auto source = std::make_shared<MemorySource>("memory:weights", pattern(kSize));
  File f = open(source, "r", config());
  std::vector<std::uint8_t> buf(kSize + 64, 0xA5);
  auto r = f.pread(buf.data(), kSize + 1000, 7).get();  // asks past the end: clipped at the source's size
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kSize - 7);
  for (std::uint64_t i = 0; i < kSize - 7; ++i) ASSERT_EQ(buf[i], testing::pattern_byte(i + 7)) << "byte " << i;
  for (std::uint64_t i = kSize - 7; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xA5) << "written past the count at " << i;
  EXPECT_EQ(r->report.at(Route::host).bytes, kSize - 7);
  EXPECT_GT(source->reads, 0u);
  EXPECT_EQ(f.path(), "memory:weights");
}

TEST_F(SourceSeam, StagedRouteReadsAnInMemorySourceIntoDeviceMemoryWithoutCuFile) {
  auto source = std::make_shared<MemorySource>("memory:weights", pattern(kSize));
  File f = open(source, "r", config());
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::memset(dev, 0xA5, kSize + 1);
  auto r = f.pread(dev, kSize, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kSize);
  auto* got = static_cast<std::uint8_t*>(dev);
  for (std::uint64_t i = 0; i < kSize; ++i) ASSERT_EQ(got[i], testing::pattern_byte(i)) << "byte " << i;
  EXPECT_EQ(got[kSize], 0xA5);
  EXPECT_EQ(r->report.at(Route::staged).bytes, kSize);
  ASSERT_FALSE(r->report.reasons.empty());
  EXPECT_EQ(r->report.reasons.front().reason, Reason::source_not_a_file);
  EXPECT_EQ(testing::fake_cufile_counters().handle_registers, 0u) << "cuFile was asked to register a non-file";
  testing::fake_cuda_free(dev);
}

TEST_F(SourceSeam, CompatOffAndRequireGdsRefuseASourceWithoutDescriptor) {
  auto source = std::make_shared<MemorySource>("memory:weights", pattern(4096 * 8));
  void* dev = testing::fake_cuda_alloc_device(4096 * 8);
  {
    File f = open(source, "r", config(CompatMode::off));
    auto r = f.pread(dev, 4096 * 8, 0).get();
    ASSERT_THAT(r, StatusIs(ErrorCode::unavailable));
    EXPECT_NE(r.status().message().find("cuFile reads only local files"), std::string::npos) << r.status().to_string();
  }
  {
    Config c = config();
    c.set_require(Requirement::gds);
    File f = open(source, "r", c);
    auto r = f.pread(dev, 4096 * 8, 0).get();
    ASSERT_THAT(r, StatusIs(ErrorCode::failed_precondition));
  }
  EXPECT_EQ(source->reads, 0u) << "a refused request read nothing";
  testing::fake_cuda_free(dev);
}

TEST_F(SourceSeam, HostAndStagedWritesReachTheSourceAndCloseClosesIt) {
  auto source = std::make_shared<MemorySource>("memory:out", std::vector<std::uint8_t>{});
  auto data = pattern(kSize);
  {
    File f = open(source, "w", config(CompatMode::on));
    auto w = f.pwrite(data.data(), kSize, 0).get();
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(source->bytes(), data);
    void* dev = testing::fake_cuda_alloc_device(kSize);
    std::memcpy(dev, data.data(), kSize);
    auto w2 = f.pwrite(dev, kSize, kSize).get();
    ASSERT_TRUE(w2.ok()) << w2.status().to_string();
    EXPECT_EQ(w2->report.at(Route::staged).bytes, kSize);
    testing::fake_cuda_free(dev);
    ASSERT_TRUE(f.sync().ok());
    ASSERT_TRUE(f.close().ok());
  }
  EXPECT_TRUE(source->closed);
  auto all = source->bytes();
  ASSERT_EQ(all.size(), 2 * kSize);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), all.begin() + kSize));
}

TEST_F(SourceSeam, AWorkerHandsASourceWithAQueueBatchesOfTasks) {
  auto source = std::make_shared<MemorySource>("memory:queue", pattern(kSize));
  source->depth = 8;
  Config c = config();
  c.set_task_size(4096).set_threads(2);
  File f = open(source, "r", c);
  std::vector<std::uint8_t> buf(kSize + 1, 0xA5);
  auto r = f.pread(buf.data(), kSize, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kSize);
  for (std::uint64_t i = 0; i < kSize; ++i) ASSERT_EQ(buf[i], testing::pattern_byte(i)) << "byte " << i;
  EXPECT_EQ(buf[kSize], 0xA5);
  EXPECT_GT(source->batches, 0u);
  EXPECT_EQ(source->largest_batch, 8u);
  EXPECT_EQ(r->report.total_ops(), (kSize + 4095) / 4096) << "every task counted once";
}

TEST(SourceSeamRouter, ASourceWithoutDescriptorIsStagedWithItsOwnReason) {
  detail::RouteQuery q;
  q.buffer.kind = detail::MemoryKind::device;
  q.buffer.device = 0;
  q.size = 1 << 20;
  q.gds_threshold = 16 << 10;
  q.path = "memory:x";
  detail::CuFileFacts facts;
  facts.source_without_descriptor = true;
  auto d = detail::decide(q, facts);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->route, Route::staged);
  EXPECT_EQ(d->reason, Reason::source_not_a_file);
  EXPECT_STREQ(reason_name(Reason::source_not_a_file), "source_not_a_file");
}

}  // namespace
}  // namespace ferry
