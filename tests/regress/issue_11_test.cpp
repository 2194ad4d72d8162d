// Issue 11 (the first read as fast as the hundredth), on the CPU: large writes take O_DIRECT by default,
// and the one-time set-up is measured step by step and named in the request that paid it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/staging_pool.hpp"
#include "base/host_memory.hpp"
#include "ferry/ferry.hpp"
#include "file/open_options.hpp"
#include "source/posix_source.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/test_files.hpp"

namespace ferry {
namespace {

using ::testing::HasSubstr;

TEST(Issue11, LargeWritesUseODirectByDefaultAndSmallOnesStayBuffered) {
  auto dir = testing::test_dir();
  const std::uint64_t big = detail::kDirectWriteThreshold, small = 4 << 20;
  detail::HostMemory data = detail::HostMemory::allocate(big).value();
  std::memset(data.data(), 0x3C, big);
  for (std::uint64_t size : {big, small}) {
    auto file = File::open((dir / "w.bin").string(), "w");
    ASSERT_TRUE(file.ok());
    if (!file->direct_io_available()) GTEST_SKIP() << file->direct_io_note();
    auto r = file->pwrite(data.data(), size, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    if (size == big) {
      EXPECT_EQ(r->report.io.direct_ops, r->report.total_ops()) << r->report.table();
    } else {
      EXPECT_EQ(r->report.io.direct_ops, 0u) << r->report.table();
    }
    ASSERT_TRUE(file->close().ok());
    auto back = testing::read_whole_file(dir / "w.bin");
    ASSERT_EQ(back.size(), size);
    EXPECT_EQ(0, std::memcmp(back.data(), data.data(), size));
  }
}

TEST(Issue11, TheFirstDeviceRequestNamesItsOneTimeSetUp) {
  detail::process_staging_pool().clear();
  testing::reset_fake_cuda();
  testing::reset_fake_cufile();
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "f.bin", 8 << 20);
  Config c;
  c.set_compat_mode(CompatMode::on).set_threads(4).set_task_size(1 << 20).set_bounce_buffer_size(1 << 20);
  detail::OpenOptions o;
  o.gpu = &testing::fake_gpu_platform();
  auto file = detail::open_file(path, "r", c, o);
  ASSERT_TRUE(file.ok());
  void* dev = testing::fake_cuda_alloc_device(8 << 20);
  const SetupCosts before = process_setup_costs();
  auto first = file->pread(dev, 8 << 20, 0).get();
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  SetupCosts paid = process_setup_costs().since(before);
  const auto& pinned = paid.steps[5];
  // One kit per job at most (a job that starts after another finished reuses its kit).
  EXPECT_GE(pinned.count, 1u) << paid.summary();
  EXPECT_LE(pinned.count, 4u) << paid.summary();
  EXPECT_GE(pinned.bytes, pinned.count * 2 * (1 << 20));
  bool noted = false;
  for (const auto& n : first->report.notes) noted |= n.find("one-time set-up during this request") != std::string::npos;
  EXPECT_TRUE(noted) << first->report.table();
  EXPECT_THAT(paid.to_json(), HasSubstr("\"pinned_buffers\""));
  // The second request reuses what the first made: nothing but, at most, kits for jobs that now run side
  // by side where the first request's ran one after another (kits are made one at a time, so a first
  // request's early job can finish before later ones start and hand them its kit). Never more kits in all
  // than jobs.
  const SetupCosts before_second = process_setup_costs();
  auto second = file->pread(dev, 8 << 20, 0).get();
  ASSERT_TRUE(second.ok());
  SetupCosts again = process_setup_costs().since(before_second);
  EXPECT_LE(pinned.count + again.steps[5].count, 4u) << paid.summary() << " / " << again.summary();
  for (std::size_t step = 0; step < again.steps.size(); ++step) {
    if (step != 5) {
      EXPECT_EQ(again.steps[step].count, 0u) << again.summary();
    }
  }
  if (again.steps[5].count == 0) {
    for (const auto& n : second->report.notes) EXPECT_THAT(n, ::testing::Not(HasSubstr("one-time set-up")));
  }
  testing::fake_cuda_free(dev);
  (void)file->close();
  detail::process_staging_pool().clear();
  testing::reset_fake_cuda();
  testing::reset_fake_cufile();
}

// A read into host memory in a process without a CUDA driver never starts one: the driver's start was
// 0.10 s of a fresh `ferry read URL` into host memory on the H200 (bench/results/2026-11-30-h200-remote).
int g_cuda_asked = 0;
bool g_cuda_loaded = false;

TEST(Issue11, AHostReadWithoutACudaDriverInTheProcessDoesNotStartOne) {
  static const detail::GpuPlatform platform{
      [](Status*) -> const detail::CudaApi* {
        ++g_cuda_asked;
        return &testing::fake_cuda_api();
      },
      [](Status*) -> const detail::CuFileApi* { return nullptr; },
      nullptr,
      []() { return g_cuda_loaded; },
  };
  testing::reset_fake_cuda();
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "h.bin", 1 << 20);
  detail::OpenOptions o;
  o.gpu = &platform;
  auto file = detail::open_file(path, "r", Config{}, o);
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf((1 << 20) + 64, 0xEE);
  for (bool loaded : {false, true}) {
    g_cuda_loaded = loaded;
    g_cuda_asked = 0;
    auto r = file->pread(buf.data(), 1 << 20, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, 1u << 20);
    EXPECT_EQ(r->report.at(Route::host).ops, r->report.total_ops()) << r->report.table();
    EXPECT_EQ(g_cuda_asked, loaded ? 1 : 0) << "driver loaded in the process: " << loaded;
  }
  EXPECT_EQ(std::vector<std::uint8_t>(buf.begin(), buf.begin() + (1 << 20)), testing::pattern(0, 1 << 20));
  EXPECT_EQ(std::vector<std::uint8_t>(buf.begin() + (1 << 20), buf.end()), std::vector<std::uint8_t>(64, 0xEE));
}

}  // namespace
}  // namespace ferry
