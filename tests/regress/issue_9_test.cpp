// Issue 9 (concurrency and the byte count), reproduced on the CPU with the fake CUDA driver and the fake
// cuFile. The same failures run against the real GPU in tests/gpu/issue_9_gpu_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "ferry/ferry.hpp"
#include "backends/staging_pool.hpp"
#include "file/open_options.hpp"
#include "platform/cuda/buffer_kind.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/cufile/cufile_env.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

namespace ferry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::StatusIs;
namespace fd = ferry::detail;

constexpr std::uint64_t kTask = 64 * 1024;

class Issue9 : public ::testing::Test {
 protected:
  void SetUp() override {
    fd::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    dir_ = testing::test_dir();
  }
  void TearDown() override {
    fd::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }
  File open(const std::string& path, const char* mode, CompatMode compat) {
    Config c;
    c.set_compat_mode(compat).set_task_size(kTask).set_bounce_buffer_size(kTask).set_threads(4);
    fd::OpenOptions o;
    o.gpu = &testing::fake_gpu_platform();
    auto f = fd::open_file(path, mode, c, o);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }
  std::filesystem::path dir_;
};

// 1. With compat "off", a 1 MiB read 1000 bytes before the end returned 1000 and zeroed the buffer after
// them (cuFile fills whole blocks at the end of a file; the fake does what the real one did).
TEST_F(Issue9, CuFileReadAtTheEndOfTheFileChangesNoBytePastTheCount) {
  testing::fake_cufile_script().zero_fills_past_end = true;
  const std::uint64_t size = (3 << 20) + 123;  // the end lies inside a block, as it usually does
  auto path = testing::write_pattern_file(dir_ / "f.bin", size);
  for (CompatMode compat : {CompatMode::off, CompatMode::automatic, CompatMode::on}) {
    SCOPED_TRACE(compat_mode_name(compat));
    if (compat == CompatMode::automatic) testing::fake_cufile_script().nvfs_major = 2;  // auto takes cuFile too
    File f = open(path, "r", compat);
    const std::uint64_t want = 1 << 20;
    auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(want));
    std::memset(dev, 7, want);
    auto r = f.pread(dev, want, size - 1000).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, 1000u);
    auto expect = testing::pattern(size - 1000, 1000);
    EXPECT_EQ(0, std::memcmp(dev, expect.data(), 1000));
    for (std::uint64_t i = 1000; i < want; ++i) ASSERT_EQ(dev[i], 7) << "byte " << i << " past the count";
    testing::fake_cuda_free(dev);
  }
}

// 2. 64 reads in flight on one File into disjoint parts of one device buffer, compat "off": one cuFile
// registration, every byte right. And a File closed and its descriptor number reused by the next open
// must not meet its old registration (5028, CU_FILE_HANDLE_ALREADY_REGISTERED).
TEST_F(Issue9, SixtyFourReadsInFlightOnOneFileRegisterItOnce) {
  const std::uint64_t piece = 1 << 20, count = 64;
  auto path = testing::write_pattern_file(dir_ / "f.bin", piece * count);
  for (int round = 0; round < 2; ++round) {
    File f = open(path, "r", CompatMode::off);
    auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(piece * count));
    std::vector<Future> futures;
    for (std::uint64_t i = 0; i < count; ++i) futures.push_back(f.pread(dev + i * piece, piece, i * piece));
    for (auto& fu : futures) {
      auto r = fu.get();
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(r->bytes, piece);
    }
    auto want = testing::pattern(0, piece * count);
    EXPECT_EQ(0, std::memcmp(dev, want.data(), want.size()));
    testing::fake_cuda_free(dev);
    ASSERT_TRUE(f.close().ok());
    EXPECT_EQ(testing::fake_cufile_counters().live_handles, 0u) << "close() leaves the file registered";
  }
  EXPECT_EQ(testing::fake_cufile_counters().handle_registers, 2u);
}

// 3. A thread with no current CUDA context: every CUDA call Ferry makes on the caller's thread runs under
// the buffer's device context, and the thread is left without one afterwards.
TEST_F(Issue9, ThreadsWithoutACurrentContextReadIntoDeviceMemory) {
  auto path = testing::write_pattern_file(dir_ / "f.bin", 5 * kTask + 3);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (CompatMode compat : {CompatMode::on, CompatMode::off}) {
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, compat] {
        File f = open(path, "r", compat);
        auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(5 * kTask + 3));
        auto r = f.pread(dev, 5 * kTask + 3, 0).get();
        auto want = testing::pattern(0, 5 * kTask + 3);
        if (!r.ok() || r->bytes != want.size() || std::memcmp(dev, want.data(), want.size()) != 0) ++bad;
        fd::CUcontext current = reinterpret_cast<fd::CUcontext>(1);
        testing::fake_cuda_api().cuCtxGetCurrent(&current);
        if (current != nullptr) ++bad;  // Ferry left a context current on the caller's thread
        testing::fake_cuda_free(dev);
      });
    }
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// 4. A device pointer whose claimed size runs past its allocation is refused before any I/O.
TEST_F(Issue9, DeviceBufferLargerThanItsAllocationIsRefusedBeforeAnyIo) {
  auto path = testing::write_pattern_file(dir_ / "f.bin", 4 * kTask);
  for (CompatMode compat : {CompatMode::on, CompatMode::off}) {
    File f = open(path, "r", compat);
    auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(kTask));
    std::memset(dev, 7, kTask);
    auto r = f.pread(dev + 16, kTask, 0).get();
    EXPECT_THAT(r, StatusIs(ErrorCode::invalid_argument, AllOf(HasSubstr("does not fit in its allocation"),
                                                               HasSubstr(std::to_string(kTask) + " bytes"))));
    for (std::uint64_t i = 0; i < kTask; ++i) ASSERT_EQ(dev[i], 7) << i;
    EXPECT_EQ(testing::fake_cufile_counters().reads, 0u);
    testing::fake_cuda_free(dev);
  }
}

// 5. One reading of CUFILE_FORCE_COMPAT_MODE: cuFile's own answer where it gives one, else the parser.
TEST(Issue9Env, ForceCompatSpellingsAreReadOneWay) {
  // As cuFile 1.15 itself read each spelling on the GPU machine (2026-11-30): only "true" in any case.
  EXPECT_EQ(fd::parse_cufile_bool("true"), true);
  EXPECT_EQ(fd::parse_cufile_bool("TRUE"), true);
  EXPECT_EQ(fd::parse_cufile_bool("True"), true);
  EXPECT_EQ(fd::parse_cufile_bool("false"), false);
  EXPECT_EQ(fd::parse_cufile_bool("FALSE"), false);
  for (const char* ignored : {"1", "yes", "YES", "on", " true", "0", "no", "off", "", "2", "enabled", "truee"}) {
    EXPECT_EQ(fd::parse_cufile_bool(ignored), std::nullopt) << ignored;
  }
  {
    testing::ScopedEnv env("CUFILE_FORCE_COMPAT_MODE", "True");
    auto f = fd::cufile_forced_compat(nullptr);
    EXPECT_TRUE(f.forced);
    EXPECT_EQ(f.source, "environment");
    EXPECT_THAT(f.describe(), HasSubstr("CUFILE_FORCE_COMPAT_MODE=True"));
  }
  {
    testing::ScopedEnv env("CUFILE_FORCE_COMPAT_MODE", "yes");  // cuFile ignores it: so does Ferry, and says so
    auto f = fd::cufile_forced_compat(nullptr);
    EXPECT_FALSE(f.forced);
    EXPECT_TRUE(f.unrecognised);
  }
  {
    testing::ScopedEnv env("CUFILE_FORCE_COMPAT_MODE", "maybe");
    auto f = fd::cufile_forced_compat(nullptr);
    EXPECT_FALSE(f.forced);
    EXPECT_TRUE(f.unrecognised);
  }
  {
    testing::ScopedEnv env("CUFILE_FORCE_COMPAT_MODE", std::nullopt);
    EXPECT_EQ(fd::cufile_forced_compat(nullptr).source, "unset");
  }
}

TEST_F(Issue9, ForceCompatTakesCuFilesOwnAnswerOverTheParser) {
  testing::ScopedEnv env("CUFILE_FORCE_COMPAT_MODE", "true");
  testing::fake_cufile_script().force_compat_parameter = false;  // a cuFile that reads it otherwise
  auto api = testing::fake_cufile_api();
  ASSERT_TRUE(api.ok());
  auto f = fd::cufile_forced_compat(*api);
  EXPECT_FALSE(f.forced);
  EXPECT_EQ(f.source, "cuFile");
  testing::fake_cufile_script().force_compat_parameter = true;
  api = testing::fake_cufile_api();
  EXPECT_TRUE(fd::cufile_forced_compat(*api).forced);
  // The router and the doctor agree because both ask this one function; the router's reason says so.
  testing::fake_cufile_script().nvfs_major = 2;
  auto path = testing::write_pattern_file(dir_ / "f.bin", 4 * kTask);
  File file = open(path, "r", CompatMode::automatic);
  auto* dev = testing::fake_cuda_alloc_device(4 * kTask);
  auto r = file.pread(dev, 4 * kTask, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->report.at(Route::staged).ops, r->report.total_ops());
  EXPECT_THAT(r->report.summary(), HasSubstr("CUFILE_FORCE_COMPAT_MODE"));
  testing::fake_cuda_free(dev);
}

}  // namespace
}  // namespace ferry
