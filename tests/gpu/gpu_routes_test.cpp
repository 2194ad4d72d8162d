// Reads and writes of real device memory on every route, byte for byte. Skips, with the driver's own
// reason, where CUDA is unusable; the cuFile cases skip where cuFile cannot register the test file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "backends/staging_pool.hpp"
#include "ferry/ferry.hpp"
#include "file/open_options.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/device_memory.hpp"
#include "support/test_files.hpp"

using ::testing::HasSubstr;

namespace ferry {
namespace {

using detail::CudaApi;
using detail::CUdeviceptr;

using testing::DeviceMemory;

const CudaApi* cuda_or_skip_reason(std::string* why) {
  const CudaApi* api = detail::process_cuda_api();
  if (api == nullptr) *why = detail::process_cuda_status().to_string();
  return api;
}

#define REQUIRE_GPU()                                        \
  std::string skip_reason;                                   \
  const CudaApi* api = cuda_or_skip_reason(&skip_reason);    \
  if (api == nullptr) GTEST_SKIP() << "no usable GPU: " << skip_reason

Config config_for(CompatMode compat, std::uint64_t task_size = 64 * 1024) {
  Config c;
  c.set_compat_mode(compat).set_task_size(task_size).set_bounce_buffer_size(task_size);
  return c;
}

struct Case {
  std::uint64_t size;
  std::uint64_t offset;
};

std::vector<Case> size_classes(std::uint64_t task) {
  std::vector<Case> out;
  for (std::uint64_t size : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4095}, std::uint64_t{4096},
                             std::uint64_t{4097}, task - 1, task, task + 1, 5 * task + 123}) {
    // The last two offsets reach the end of the test file (8 tasks + 777 bytes): issue 9's case.
    for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4095}, std::uint64_t{4096},
                                 task - 1, task + 4096, 8 * task + 777 - 1000, 8 * task - 5}) {
      out.push_back({size, offset});
    }
  }
  return out;
}

// Reads every size class at every offset into device memory with `compat`, checking bytes and routes.
void read_every_class(const CudaApi& api, CompatMode compat, std::vector<Route> allowed, bool* skipped) {
  constexpr std::uint64_t kTask = 64 * 1024;
  auto dir = testing::test_dir();
  const std::uint64_t file_size = 8 * kTask + 777;
  std::string path = testing::write_pattern_file(dir / "data.bin", file_size);
  auto file = File::open(path, "r", config_for(compat, kTask));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  for (const Case& c : size_classes(kTask)) {
    DeviceMemory dev(api, c.size);
    auto r = file->pread(dev.get(), c.size, c.offset).get();
    if (!r.ok() && compat == CompatMode::off && r.status().code() == ErrorCode::unavailable) {
      *skipped = true;
      GTEST_SKIP() << "cuFile cannot be used for " << path << ": " << r.status().to_string();
    }
    ASSERT_TRUE(r.ok()) << "size " << c.size << " offset " << c.offset << ": " << r.status().to_string();
    std::uint64_t expect_bytes = c.offset >= file_size ? 0 : std::min(c.size, file_size - c.offset);
    ASSERT_EQ(r->bytes, expect_bytes) << "size " << c.size << " offset " << c.offset;
    auto got = dev.to_host();
    auto want = testing::pattern(c.offset, expect_bytes);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), expect_bytes)) << "size " << c.size << " offset " << c.offset;
    for (std::uint64_t i = expect_bytes; i < c.size; ++i) ASSERT_EQ(got[i], 0xA5) << "byte past EOF written at " << i;
    if (expect_bytes > 0) {
      const Report& rep = r->report;
      std::uint64_t on_allowed = 0;
      for (Route a : allowed) on_allowed += rep.at(a).ops;
      EXPECT_EQ(rep.total_ops(), on_allowed) << "size " << c.size << " offset " << c.offset << ": " << rep.summary();
      EXPECT_EQ(rep.at(Route::host).ops, 0u) << rep.summary();
    }
  }
}

TEST(GpuRoutes, AReadAfterAWarmUpPinsNothing) {
  REQUIRE_GPU();
  // A shape no other test uses, so that the kits counted are this test's.
  constexpr std::uint64_t kTask = 192 * 1024;
  Config c = config_for(CompatMode::on, kTask);
  c.set_threads(3);
  const std::uint64_t before = ferry::pinned_memory_use().pinned_bytes;
  ASSERT_TRUE(warm_up(0, c).ok());
  const std::uint64_t warmed = ferry::pinned_memory_use().pinned_bytes;
  EXPECT_GE(warmed - before, 3 * 2 * kTask) << "three kits of two buffers";
  ASSERT_TRUE(warm_up(0, c).ok());
  EXPECT_EQ(ferry::pinned_memory_use().pinned_bytes, warmed) << "a second warm-up pinned again";
  std::string path = testing::write_pattern_file(testing::test_dir() / "data.bin", 12 * kTask + 5);
  auto file = File::open(path, "r", c);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  DeviceMemory dev(*api, 12 * kTask + 6);
  auto r = file->pread(dev.get(), 12 * kTask + 6, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(ferry::pinned_memory_use().pinned_bytes, warmed) << "the read pinned more: " << r->report.summary();
  auto got = dev.to_host();
  auto want = testing::pattern(0, 12 * kTask + 5);
  ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size()));
  EXPECT_EQ(got.back(), 0xA5) << "the byte past the end of the file was written";
}

TEST(GpuRoutes, StagedReadsEverySizeClassByteExact) {
  REQUIRE_GPU();
  bool skipped = false;
  read_every_class(*api, CompatMode::on, {Route::staged}, &skipped);
}

TEST(GpuRoutes, AutoReadsEverySizeClassByteExact) {
  REQUIRE_GPU();
  bool skipped = false;
  // Without nvidia-fs, auto is the staged route; with it (or P2PDMA), cuFile's direct routes. Requests
  // below the GDS threshold are staged either way; never cuFile's POSIX path.
  read_every_class(*api, CompatMode::automatic, {Route::staged, Route::nvfs, Route::p2p}, &skipped);
}

TEST(GpuRoutes, CuFileReadsEverySizeClassByteExact) {
  REQUIRE_GPU();
  bool skipped = false;
  // A cuFile read's unaligned edges go through a bounce buffer (staged, reason cufile_unaligned_edge).
  read_every_class(*api, CompatMode::off, {Route::cufile_posix, Route::nvfs, Route::p2p, Route::staged}, &skipped);
}

void write_every_class(const CudaApi& api, CompatMode compat) {
  constexpr std::uint64_t kTask = 64 * 1024;
  auto dir = testing::test_dir();
  for (const Case& c : size_classes(kTask)) {
    std::string path = (dir / "out.bin").string();
    std::filesystem::remove(path);
    auto file = File::open(path, "w", config_for(compat, kTask));
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    DeviceMemory dev(api, c.size);
    auto data = testing::pattern(c.offset, c.size);
    dev.from_host(data);
    auto r = file->pwrite(dev.get(), c.size, c.offset).get();
    if (!r.ok() && compat == CompatMode::off && r.status().code() == ErrorCode::unavailable) {
      GTEST_SKIP() << "cuFile cannot be used for " << path << ": " << r.status().to_string();
    }
    ASSERT_TRUE(r.ok()) << "size " << c.size << " offset " << c.offset << ": " << r.status().to_string();
    ASSERT_EQ(r->bytes, c.size);
    ASSERT_TRUE(file->close().ok());
    auto on_disk = testing::read_whole_file(path);
    ASSERT_EQ(on_disk.size(), c.size ? c.offset + c.size : 0u) << "size " << c.size << " offset " << c.offset;
    if (c.size) {
      ASSERT_EQ(0, std::memcmp(on_disk.data() + c.offset, data.data(), c.size));
    }
  }
}

TEST(GpuRoutes, StagedWritesEverySizeClassByteExact) {
  REQUIRE_GPU();
  write_every_class(*api, CompatMode::on);
}

TEST(GpuRoutes, CuFileWritesEverySizeClassByteExact) {
  REQUIRE_GPU();
  write_every_class(*api, CompatMode::off);
}

TEST(GpuRoutes, OneGibibyteReadIs256OperationsWithDefaults) {
  REQUIRE_GPU();
  auto dir = testing::test_dir();
  const std::uint64_t size = 1ull << 30;
  std::string path = testing::write_pattern_file(dir / "big.bin", size);
  auto file = File::open(path, "r", Config());
  ASSERT_TRUE(file.ok());
  DeviceMemory dev(*api, size);
  auto r = file->pread(dev.get(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, size);
  EXPECT_EQ(r->report.total_ops(), 256u) << r->report.summary();
  auto got = dev.to_host();
  auto want = testing::pattern(0, size);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), size));
  std::cout << r->report.summary() << "\n";
}

// Small reads kept in flight from one thread are taken together on the staged route (engine/queue.hpp): every
// read's bytes, the bytes between the destinations, and each read's own report, in real device memory.
TEST(GpuRoutes, SmallReadsInFlightAreGatheredByteExact) {
  REQUIRE_GPU();
  constexpr std::uint64_t kFile = 64ull << 20;
  std::string path = testing::write_pattern_file(testing::test_dir() / "small.bin", kFile + 333);
  auto file = File::open(path, "r");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  for (std::uint64_t size : {std::uint64_t{4096}, std::uint64_t{4000}, std::uint64_t{65536}}) {
    constexpr std::size_t kReads = 512;
    const std::uint64_t slot = size + 4096;
    DeviceMemory dev(*api, kReads * slot);
    std::vector<std::uint64_t> offsets;
    for (std::size_t i = 0; i < kReads; ++i) {
      offsets.push_back((i * 7919 % (kFile / 65536)) * 65536 + (size % 4096 != 0 ? i % 3 : 0));
    }
    offsets.back() = kFile + 333 - size / 2;  // the last one crosses the end of the file
    // One read first, waited for (its pages found cached).
    ASSERT_TRUE(file->pread(dev.get(), size, 0).get().ok());
    std::vector<Future> live;
    for (std::size_t i = 0; i < kReads; ++i) {
      live.push_back(file->pread(static_cast<char*>(dev.get()) + i * slot, size, offsets[i]));
    }
    std::uint64_t gathered = 0;
    for (std::size_t i = 0; i < kReads; ++i) {
      auto r = live[i].get();
      ASSERT_TRUE(r.ok()) << "read " << i << ": " << r.status().to_string();
      ASSERT_EQ(r->bytes, std::min(size, kFile + 333 - offsets[i])) << "read " << i;
      if (r->report.at(Route::staged).ops == 0) GTEST_SKIP() << "small reads take another route here: " << r->report.summary();
      gathered += r->report.io.gathered_ops;
    }
    EXPECT_GT(gathered, kReads / 2) << size << "-byte reads with " << kReads << " in flight from one thread";
    const auto got = dev.to_host();
    for (std::size_t i = 0; i < kReads; ++i) {
      const std::uint64_t n = std::min(size, kFile + 333 - offsets[i]);
      const auto want = testing::pattern(offsets[i], n);
      ASSERT_EQ(0, std::memcmp(got.data() + i * slot, want.data(), n)) << size << "-byte read " << i;
      for (std::uint64_t k = n; k < slot; ++k) {
        ASSERT_EQ(got[i * slot + k], 0xA5) << size << "-byte read " << i << " wrote byte " << k;
      }
    }
  }
}

TEST(GpuRoutes, RequireGdsFailsBeforeIoWithoutNvidiaFs) {
  REQUIRE_GPU();
  auto dir = testing::test_dir();
  std::string path = testing::write_pattern_file(dir / "data.bin", 1 << 20);
  Config c;
  c.set_require(Requirement::gds);
  auto file = File::open(path, "r", c);
  ASSERT_TRUE(file.ok());
  DeviceMemory dev(*api, 1 << 20);
  auto r = file->pread(dev.get(), 1 << 20, 0).get();
  if (r.ok()) {
    // Only a machine with nvidia-fs (or P2PDMA) gets here, and then every op was direct.
    EXPECT_EQ(r->report.at(Route::cufile_posix).ops, 0u);
    return;
  }
  EXPECT_EQ(r.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(r.status().message(), HasSubstr("require=gds"));
  auto untouched = dev.to_host();
  EXPECT_EQ(untouched[0], 0xA5);
  EXPECT_EQ(untouched.back(), 0xA5);
}

}  // namespace
}  // namespace ferry
