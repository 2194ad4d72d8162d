// Device reads and writes end to end through File, on the fake CUDA driver and the fake cuFile: the
// staged pipeline's ordering, every router decision as a user sees it, cuFile's statistics splitting the
// operations, and strict mode. The same paths run on the real GPU in tests/gpu.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "backends/staging_pool.hpp"
#include "report/cufile_attribution.hpp"
#include "backends/gds_backend.hpp"
#include "file/open_options.hpp"
#include "file/route_selection.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/gpu_platform.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

using ::testing::HasSubstr;

namespace ferry {
namespace {

using detail::CudaApi;
using detail::CuFileApi;
using testing::FakeCopyMode;
using testing::FakeCuFileRoute;

const detail::GpuPlatform& kFakePlatform = testing::fake_gpu_platform();

class DeviceRoutes : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kTask = 64 * 1024;

  void SetUp() override {
    detail::process_staging_pool().clear();  // kits made on an earlier test's fake
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    dir_ = testing::test_dir();
  }
  void TearDown() override {
    detail::process_staging_pool().clear();
    EXPECT_EQ(testing::fake_cuda_pending_copies(), 0u) << "copies still queued after the request completed";
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }

  Config config(CompatMode compat) {
    Config c;
    c.set_compat_mode(compat).set_task_size(kTask).set_bounce_buffer_size(kTask).set_threads(4);
    return c;
  }
  File open(const std::string& path, const char* mode, const Config& c) {
    detail::OpenOptions o;
    o.gpu = &kFakePlatform;
    auto f = detail::open_file(path, mode, c, o);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }
  Result<Transfer> read_to_device(const Config& c, std::uint64_t file_size, std::uint64_t size,
                                  std::uint64_t offset, std::vector<std::uint8_t>* got) {
    std::string path = testing::write_pattern_file(dir_ / "data.bin", file_size);
    File f = open(path, "r", c);
    void* dev = testing::fake_cuda_alloc_device(size + 1);
    std::memset(dev, 0xA5, size + 1);
    auto r = f.pread(dev, size, offset).get();
    got->assign(static_cast<std::uint8_t*>(dev), static_cast<std::uint8_t*>(dev) + size + 1);
    testing::fake_cuda_free(dev);
    return r;
  }

  std::filesystem::path dir_;
};

TEST_F(DeviceRoutes, StagedReadIsByteExactWithDeferredCopies) {
  // Copies happen only when synchronised: a bounce buffer reused too early would corrupt the result.
  testing::fake_cuda_script().copy_mode = FakeCopyMode::deferred;
  Config c = config(CompatMode::on);
  c.set_bounce_buffer_size(16 * 1024);  // four pieces per task, two buffers per worker
  std::vector<std::uint8_t> got;
  const std::uint64_t size = 20 * kTask + 12345;
  auto r = read_to_device(c, size + 99, size, 77, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, size);
  auto want = testing::pattern(77, size);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), size));
  EXPECT_EQ(got[size], 0xA5);
  EXPECT_EQ(r->report.at(Route::staged).ops, r->report.total_ops());
  EXPECT_THAT(r->report.summary(), HasSubstr("all staged (reason: compat mode on"));
  EXPECT_GT(testing::fake_cuda_counters().htod_async_copies, 20u * 4);
}

// A small read's fixed cost: a one-piece request records no event (its worker waits for the whole stream
// at the end); a worker's pieces after the first record one each, for the slot the next piece may reuse.
TEST_F(DeviceRoutes, StagedReadsRecordAnEventOnlyWhereABounceBufferIsReused) {
  testing::fake_cuda_script().copy_mode = FakeCopyMode::deferred;
  Config c = config(CompatMode::on);
  c.set_threads(1).set_bounce_buffer_size(16 * 1024);
  std::vector<std::uint8_t> got;
  auto r = read_to_device(c, kTask, 4096, 100, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(testing::fake_cuda_counters().events_recorded, 0u);
  EXPECT_EQ(0, std::memcmp(got.data(), testing::pattern(100, 4096).data(), 4096));
  EXPECT_EQ(got[4096], 0xA5);

  detail::process_staging_pool().clear();
  testing::reset_fake_cuda();
  testing::fake_cuda_script().copy_mode = FakeCopyMode::deferred;
  const std::uint64_t size = 3 * kTask;  // 3 aligned tasks of 4 pieces of 16 KiB on one worker, two bounce buffers
  r = read_to_device(c, size + 10, size, 0, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(testing::fake_cuda_counters().events_recorded, 11u);
  EXPECT_EQ(0, std::memcmp(got.data(), testing::pattern(0, size).data(), size));
  EXPECT_EQ(got[size], 0xA5);
}

TEST_F(DeviceRoutes, StagedReadStopsAtEndOfFileWithoutWritingPastIt) {
  std::vector<std::uint8_t> got;
  auto r = read_to_device(config(CompatMode::on), 3 * kTask + 5, 10 * kTask, kTask, &got);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 2 * kTask + 5);
  auto want = testing::pattern(kTask, 2 * kTask + 5);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size()));
  for (std::uint64_t i = want.size(); i < got.size(); ++i) ASSERT_EQ(got[i], 0xA5) << i;
}

// A one-task read into GPU memory inside the size the File saw last asks for no size (no fstat): the bounce
// buffer stands between the file and the destination, so a file that shrank since ends the read where its data
// does, and nothing past that is written. A read of more tasks asks again.
TEST_F(DeviceRoutes, AOneTaskReadInsideTheSizeSeenLastAsksForNoSizeAndEndsWhereTheDataDoes) {
  std::string path = testing::write_pattern_file(dir_ / "data.bin", 4 * kTask);
  testing::ScriptedSyscalls sys;
  detail::OpenOptions o;
  o.gpu = &kFakePlatform;
  o.syscalls = &sys;
  auto f = detail::open_file(path, "r", config(CompatMode::on), o);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(2 * kTask));
  std::memset(dev, 0xA5, 2 * kTask);
  ASSERT_TRUE(f->pread(dev, kTask, 0).get().ok());  // the first asks
  const int sizes_asked = sys.count(testing::Op::fstat);
  auto r = f->pread(dev, kTask, kTask).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kTask);
  EXPECT_EQ(std::vector<std::uint8_t>(dev, dev + kTask), testing::pattern(kTask, kTask));
  EXPECT_EQ(sys.count(testing::Op::fstat), sizes_asked);

  std::filesystem::resize_file(path, 2 * kTask + 100);
  std::memset(dev, 0xA5, 2 * kTask);
  r = f->pread(dev, kTask, 2 * kTask).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 100u) << "the read ends where the data does";
  EXPECT_EQ(sys.count(testing::Op::fstat), sizes_asked);
  EXPECT_EQ(std::vector<std::uint8_t>(dev, dev + 100), testing::pattern(2 * kTask, 100));
  EXPECT_EQ(std::vector<std::uint8_t>(dev + 100, dev + 2 * kTask), std::vector<std::uint8_t>(2 * kTask - 100, 0xA5))
      << "bytes past the end of the data were written";

  r = f->pread(dev, 2 * kTask, kTask).get();  // two tasks: asks, and reads to the new end
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(sys.count(testing::Op::fstat), sizes_asked + 1);
  EXPECT_EQ(r->bytes, kTask + 100);
  EXPECT_EQ(std::vector<std::uint8_t>(dev, dev + kTask + 100), testing::pattern(kTask, kTask + 100));
  testing::fake_cuda_free(dev);
}

TEST_F(DeviceRoutes, PreparePinsEveryWorkersBuffersOnceAndRequestsReuseThem) {
  std::string path = testing::write_pattern_file(dir_ / "data.bin", 16 * kTask);
  File f = open(path, "r", config(CompatMode::on));
  void* dev = testing::fake_cuda_alloc_device(16 * kTask);
  auto plan = f.prepare(dev, 16 * kTask);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->route, Route::staged);
  EXPECT_EQ(plan->reason, Reason::compat_mode_on);
  EXPECT_EQ(plan->memory, "device");
  EXPECT_EQ(plan->device, 0);
  // One registered huge-page region per worker, holding both of its buffers.
  EXPECT_EQ(testing::fake_cuda_counters().host_registers, 4u) << "one region per worker";
  EXPECT_EQ(testing::fake_cuda_counters().pinned_allocs, 0u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.pread(dev, 16 * kTask, 0).get().ok());
  EXPECT_EQ(testing::fake_cuda_counters().host_registers, 4u) << "requests pinned more memory";
  testing::fake_cuda_free(dev);
}

TEST_F(DeviceRoutes, WarmUpPinsAKitForEveryThreadSoThatTheFirstReadPinsNothing) {
  const Config c = config(CompatMode::on);
  ASSERT_TRUE(detail::warm_up(testing::fake_cuda_api(), 0, c).ok());
  EXPECT_EQ(testing::fake_cuda_counters().host_registers, 4u) << "one region per worker";
  ASSERT_TRUE(detail::warm_up(testing::fake_cuda_api(), 0, c).ok());
  EXPECT_EQ(testing::fake_cuda_counters().host_registers, 4u) << "a second warm-up pinned again";
  std::vector<std::uint8_t> got;
  auto r = read_to_device(c, 16 * kTask, 16 * kTask, 0, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(testing::fake_cuda_counters().host_registers, 4u) << "the read pinned more memory";
  std::vector<std::uint8_t> want = testing::pattern(0, 16 * kTask);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin())) << "wrong bytes after a warm-up";
  EXPECT_EQ(got.back(), 0xA5) << "the byte after the destination was written";
}

TEST_F(DeviceRoutes, AWarmUpCountsTheKitsReadsHoldAndMakesOnlyTheRest) {
  // A load that starts during a warm-up takes kits as they are made: the warm-up must not make a second
  // set for the workers that already have one.
  const detail::CudaApi& api = testing::fake_cuda_api();
  const Config c = config(CompatMode::on);
  auto& pool = detail::process_staging_pool();
  detail::ScopedDeviceContext context(api, 0);  // acquire() needs the device's context current
  std::vector<std::unique_ptr<detail::StagingKit>> held;
  for (int i = 0; i < 3; ++i) {
    auto kit = pool.acquire({&api, 0, c.bounce_buffer_size()}, c.bounce_buffers_per_thread());
    ASSERT_TRUE(kit.ok()) << kit.status().to_string();
    held.push_back(std::move(*kit));
  }
  ASSERT_TRUE(detail::warm_up(api, 0, c).ok());
  EXPECT_EQ(testing::fake_cuda_counters().host_registers, 4u) << "3 kits in use + 1 made = the 4 threads";
  for (auto& kit : held) pool.release(std::move(kit));
  ASSERT_TRUE(detail::warm_up(api, 0, c).ok());
  EXPECT_EQ(testing::fake_cuda_counters().host_registers, 4u);
}

TEST_F(DeviceRoutes, AWarmUpWhileReadsRunMakesOneKitPerThreadInAll) {
  // meta_parameters' case: the load may start before the warm-up is done. Whoever makes a kit, the two
  // together make no more than the threads' kits, and every read is byte-exact.
  const Config c = config(CompatMode::on);
  std::string path = testing::write_pattern_file(dir_ / "data.bin", 16 * kTask);
  File f = open(path, "r", c);
  const std::vector<std::uint8_t> want = testing::pattern(0, 16 * kTask);
  Status warmed;
  std::thread warming([&] { warmed = detail::warm_up(testing::fake_cuda_api(), 0, c); });
  for (int i = 0; i < 20; ++i) {
    void* dev = testing::fake_cuda_alloc_device(16 * kTask + 1);
    std::memset(dev, 0xA5, 16 * kTask + 1);
    auto r = f.pread(dev, 16 * kTask, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const auto* got = static_cast<const std::uint8_t*>(dev);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got)) << "read " << i;
    EXPECT_EQ(got[16 * kTask], 0xA5) << "read " << i << " wrote past its destination";
    testing::fake_cuda_free(dev);
  }
  warming.join();
  ASSERT_TRUE(warmed.ok()) << warmed.to_string();
  EXPECT_EQ(testing::fake_cuda_counters().host_registers, 4u) << "kits made by the warm-up and the reads";
}

TEST_F(DeviceRoutes, AWarmUpThatCannotPinSaysWhy) {
  testing::fake_cuda_script().fail("cuMemHostRegister_v2", detail::CUDA_ERROR_OUT_OF_MEMORY);
  testing::fake_cuda_script().fail("cuMemHostAlloc", detail::CUDA_ERROR_OUT_OF_MEMORY);
  Status s = detail::warm_up(testing::fake_cuda_api(), 0, config(CompatMode::on));
  testing::fake_cuda_script().failures.clear();
  EXPECT_THAT(s, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT(s.message(), HasSubstr("pinned bounce buffer"));
}

TEST_F(DeviceRoutes, BounceBuffersFallBackToCuMemHostAllocWhenRegistrationFails) {
  testing::fake_cuda_script().fail("cuMemHostRegister_v2", detail::CUDA_ERROR_NOT_SUPPORTED);
  std::vector<std::uint8_t> got;
  const std::uint64_t size = 6 * kTask + 9;
  auto r = read_to_device(config(CompatMode::on), size, size, 0, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto want = testing::pattern(0, size);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), size));
  EXPECT_GT(testing::fake_cuda_counters().pinned_allocs, 0u);
}

TEST_F(DeviceRoutes, TheCallersCurrentContextIsLeftAsItWas) {
  // A caller's thread with no current context: neither prepare() nor a cuFile request may leave one.
  const auto& api = testing::fake_cuda_api();
  std::string path = testing::write_pattern_file(dir_ / "data.bin", 4 * kTask);
  void* dev = testing::fake_cuda_alloc_device(4 * kTask);
  detail::CUcontext current = reinterpret_cast<detail::CUcontext>(1);
  for (CompatMode compat : {CompatMode::on, CompatMode::off}) {
    File f = open(path, "r", config(compat));
    ASSERT_TRUE(f.prepare(dev, 4 * kTask).ok());
    ASSERT_TRUE(f.pread(dev, 4 * kTask, 0).get().ok());
    ASSERT_EQ(api.cuCtxGetCurrent(&current), detail::CUDA_SUCCESS);
    EXPECT_EQ(current, nullptr) << "compat " << compat_mode_name(compat);
  }
  testing::fake_cuda_free(dev);
}

TEST_F(DeviceRoutes, PrepareRefusesWhatARequestWouldBeRefused) {
  testing::fake_cufile_script().handle_register_error = 5027;
  std::string path = testing::write_pattern_file(dir_ / "data.bin", kTask);
  File f = open(path, "r", config(CompatMode::off));
  void* dev = testing::fake_cuda_alloc_device(kTask);
  auto plan = f.prepare(dev, kTask);
  ASSERT_THAT(plan, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT(plan.status().message(), HasSubstr("5027"));
  testing::fake_cuda_free(dev);
}

TEST_F(DeviceRoutes, StagedWriteIsByteExact) {
  std::string path = (dir_ / "out.bin").string();
  File f = open(path, "w", config(CompatMode::on));
  const std::uint64_t size = 7 * kTask + 3;
  auto data = testing::pattern(4096, size);
  void* dev = testing::fake_cuda_alloc_device(size);
  std::memcpy(dev, data.data(), size);
  auto r = f.pwrite(dev, size, 4096).get();
  testing::fake_cuda_free(dev);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->report.at(Route::staged).ops, r->report.total_ops());
  auto disk = testing::read_whole_file(path);
  ASSERT_EQ(disk.size(), 4096 + size);
  EXPECT_EQ(0, std::memcmp(disk.data() + 4096, data.data(), size));
}

TEST_F(DeviceRoutes, CopyFailureFailsTheRequestAndDrainsEveryStream) {
  testing::fake_cuda_script().copy_mode = FakeCopyMode::deferred;
  testing::fake_cuda_script().fail("cuMemcpyHtoDAsync_v2", detail::CUDA_ERROR_ILLEGAL_ADDRESS, 1);
  std::vector<std::uint8_t> got;
  auto r = read_to_device(config(CompatMode::on), 16 * kTask, 16 * kTask, 0, &got);
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::io_error));
  EXPECT_THAT(r.status().message(), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  EXPECT_THAT(r.status().message(), HasSubstr("to GPU 0"));
}

// A failed wait for the copies: the worker's kit is destroyed with copies still queued from its buffers;
// its stream must go before the buffers do (the fake performs queued copies when a stream is destroyed, and
// read unmapped memory here when the buffers went first).
TEST_F(DeviceRoutes, AFailedWaitForCopiesFailsTheRequestAndFreesNoBufferUnderThem) {
  testing::fake_cuda_script().copy_mode = FakeCopyMode::deferred;
  testing::fake_cuda_script().fail("cuStreamQuery", detail::CUDA_ERROR_ILLEGAL_ADDRESS);
  std::vector<std::uint8_t> got;
  auto r = read_to_device(config(CompatMode::on), 16 * kTask, 16 * kTask, 0, &got);
  testing::fake_cuda_script().failures.clear();
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::io_error));
  EXPECT_THAT(r.status().message(), HasSubstr("waiting for copies to GPU 0"));
  EXPECT_EQ(testing::fake_cuda_pending_copies(), 0u) << "copies left queued on a destroyed kit";
}

TEST_F(DeviceRoutes, AutoStagesWhenNvidiaFsIsNotLoaded) {
  std::vector<std::uint8_t> got;
  auto r = read_to_device(config(CompatMode::automatic), 4 * kTask, 4 * kTask, 0, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->report.at(Route::staged).ops, 4u);
  ASSERT_EQ(r->report.reasons.size(), 1u);
  EXPECT_EQ(r->report.reasons[0].reason, Reason::nvidia_fs_not_loaded);
  EXPECT_EQ(testing::fake_cufile_counters().reads, 0u);
  // Issue 11: decided from the platform checks alone; cuFile's driver (0.4-0.85 s) was never opened.
  EXPECT_EQ(testing::fake_cufile_counters().driver_opens, 0u);
  EXPECT_EQ(testing::fake_cufile_counters().handle_registers, 0u);
  EXPECT_THAT(r->report.reasons[0].detail, HasSubstr("checked without opening cuFile"));
  EXPECT_THAT(r->report.reasons[0].detail, HasSubstr("nvidia_fs not loaded"));
}

// A data loader's reads of many sizes below the threshold are one row of the File's report, not one a size.
TEST_F(DeviceRoutes, SmallReadsOfManySizesAreOneReasonInTheReport) {
  std::string path = testing::write_pattern_file(dir_ / "data.bin", 4 * kTask);
  Config c = config(CompatMode::automatic);
  c.set_gds_threshold(2 * kTask);
  File f = open(path, "r", c);
  auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(kTask));
  for (std::uint64_t size = 1000; size < 1100; ++size) {
    auto r = f.pread(dev, size, size).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(std::vector<std::uint8_t>(dev, dev + size), testing::pattern(size, size));
  }
  const Report report = f.report();
  EXPECT_EQ(report.at(Route::staged).ops, 100u);
  ASSERT_EQ(report.reasons.size(), 1u);
  EXPECT_EQ(report.reasons[0].reason, Reason::below_gds_threshold);
  EXPECT_EQ(report.reasons[0].detail, fmt::format("{} bytes", 2 * kTask));
  testing::fake_cuda_free(dev);
}

TEST_F(DeviceRoutes, AutoStillPicksCuFilesDirectRoutesWhereTheyExist) {
  for (bool nvfs : {true, false}) {
    testing::reset_fake_cufile();
    if (nvfs) {
      testing::fake_cufile_script().nvfs_major = 2;
      testing::fake_cufile_script().read_route = FakeCuFileRoute::nvfs;
    } else {
      testing::fake_cufile_script().p2pdma = true;
      testing::fake_cufile_script().read_route = FakeCuFileRoute::p2p;
    }
    std::vector<std::uint8_t> got;
    auto r = read_to_device(config(CompatMode::automatic), 4 * kTask, 4 * kTask, 0, &got);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Route want = nvfs ? Route::nvfs : Route::p2p;
    EXPECT_EQ(r->report.at(want).ops, 4u) << r->report.summary();
    EXPECT_EQ(testing::fake_cufile_counters().driver_opens, 1u);
  }
}

TEST_F(DeviceRoutes, AutoNamesTheFailedRegistrationAndCuFilesOwnWords) {
  testing::fake_cufile_script().nvfs_major = 2;  // so that auto consults cuFile
  testing::fake_cufile_script().handle_register_error = 5027;
  testing::fake_cufile_script().handle_register_log_line = "udev property not found: ID_FS_USAGE /dev/vda";
  std::vector<std::uint8_t> got;
  auto r = read_to_device(config(CompatMode::automatic), 4 * kTask, 4 * kTask, 0, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->report.at(Route::staged).ops, 4u);
  ASSERT_EQ(r->report.reasons.size(), 1u);
  EXPECT_EQ(r->report.reasons[0].reason, Reason::cufile_handle_register_failed);
  EXPECT_THAT(r->report.reasons[0].detail, HasSubstr("5027"));
  EXPECT_THAT(r->report.reasons[0].detail, HasSubstr("ID_FS_USAGE"));
  EXPECT_THAT(r->report.summary(), HasSubstr("cuFile handle registration failed"));
}

TEST_F(DeviceRoutes, CompatOffFailsClearlyWhenRegistrationFails) {
  testing::fake_cufile_script().handle_register_error = 5027;
  std::vector<std::uint8_t> got;
  auto r = read_to_device(config(CompatMode::off), 4 * kTask, 4 * kTask, 0, &got);
  ASSERT_THAT(r, StatusIs(ErrorCode::unavailable));
  EXPECT_THAT(r.status().message(), HasSubstr("compat mode off requires cuFile"));
  EXPECT_THAT(r.status().message(), HasSubstr("5027"));
  EXPECT_THAT(r.status().message(), HasSubstr("data.bin"));
  EXPECT_EQ(got[0], 0xA5);  // nothing was read
}

TEST_F(DeviceRoutes, CompatOffIsAttributedToCuFilesPosixPathByItsStatistics) {
  std::vector<std::uint8_t> got;
  const std::uint64_t size = 6 * kTask;
  auto r = read_to_device(config(CompatMode::off), size, size, 0, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto want = testing::pattern(0, size);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), size));
  const Report& rep = r->report;
  EXPECT_EQ(rep.at(Route::cufile_posix).ops, rep.total_ops());
  EXPECT_EQ(rep.at(Route::cufile_posix).bytes, size);
  ASSERT_TRUE(rep.cufile.has_value());
  EXPECT_EQ(rep.cufile->nvfs_reads, 0u);
  EXPECT_EQ(rep.cufile->posix_reads, testing::fake_cufile_counters().reads);
  EXPECT_THAT(rep.summary(), HasSubstr("all cufile-posix"));
  EXPECT_THAT(rep.summary(), HasSubstr("nvfs=0"));
}

// Issue 9: a cuFile read that met the end of the file wrote zeros past the count it returned. The
// request's unaligned last bytes now go through a bounce buffer; the rest stays cuFile's.
TEST_F(DeviceRoutes, CuFileReadsUnalignedEdgesThroughABounceBuffer) {
  std::vector<std::uint8_t> got;
  const std::uint64_t size = 6 * kTask + 100;
  auto r = read_to_device(config(CompatMode::off), size, size, 0, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto want = testing::pattern(0, size);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), size));
  const Report& rep = r->report;
  EXPECT_EQ(rep.at(Route::cufile_posix).ops, 6u);
  EXPECT_EQ(rep.at(Route::cufile_posix).bytes, 6 * kTask);
  EXPECT_EQ(rep.at(Route::staged).ops, 1u);
  EXPECT_EQ(rep.at(Route::staged).bytes, 100u);
  EXPECT_EQ(testing::fake_cufile_counters().reads, 6u);  // cuFile never saw the edge
  bool edge_reason = false;
  for (const auto& rc : rep.reasons) edge_reason |= rc.route == Route::staged && rc.reason == Reason::cufile_unaligned_edge;
  EXPECT_TRUE(edge_reason) << rep.summary();
}

TEST_F(DeviceRoutes, StatisticsSplitMixedRoutes) {
  testing::fake_cufile_script().nvfs_major = 2;
  testing::fake_cufile_script().nvfs_minor = 17;
  testing::fake_cufile_script().read_route = FakeCuFileRoute::nvfs;
  std::vector<std::uint8_t> got;
  auto r = read_to_device(config(CompatMode::automatic), 8 * kTask, 8 * kTask, 0, &got);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->report.at(Route::nvfs).ops, 8u);
  EXPECT_EQ(r->report.reasons[0].reason, Reason::gds_available);

  Report mixed;
  for (int i = 0; i < 10; ++i) mixed.count(Route::nvfs, Reason::gds_available, "", 100, 10);
  CuFileCounters delta;
  delta.nvfs_reads = 6;
  delta.posix_reads = 4;
  detail::attribute_by_cufile_stats(mixed, delta, detail::Direction::read);
  EXPECT_EQ(mixed.at(Route::nvfs).ops, 6u);
  EXPECT_EQ(mixed.at(Route::cufile_posix).ops, 4u);
  EXPECT_EQ(mixed.total_bytes(), 1000u);
}

TEST_F(DeviceRoutes, StrictModeFailsAfterIoWhenStatisticsShowThePosixPath) {
  // The driver claims nvidia-fs, but cuFile's counters say its POSIX path did the work.
  testing::fake_cufile_script().nvfs_major = 2;
  testing::fake_cufile_script().read_route = FakeCuFileRoute::posix;
  Config c = config(CompatMode::automatic);
  c.set_require(Requirement::gds);
  std::vector<std::uint8_t> got;
  auto r = read_to_device(c, 4 * kTask, 4 * kTask, 0, &got);
  ASSERT_THAT(r, StatusIs(ErrorCode::failed_precondition));
  EXPECT_THAT(r.status().message(), HasSubstr("4 of 4 operations"));
  EXPECT_THAT(r.status().message(), HasSubstr("posix=4"));
}

TEST_F(DeviceRoutes, StrictModeRefusesBeforeIoWithoutNvidiaFs) {
  Config c = config(CompatMode::automatic);
  c.set_require(Requirement::gds);
  std::vector<std::uint8_t> got;
  auto r = read_to_device(c, 4 * kTask, 4 * kTask, 0, &got);
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::failed_precondition));
  EXPECT_THAT(r.status().message(), HasSubstr("no I/O was done"));
  EXPECT_EQ(testing::fake_cufile_counters().reads, 0u);
  EXPECT_EQ(got[0], 0xA5);
}

TEST_F(DeviceRoutes, ForcedCompatModeShowsUpInBothPolicies) {
  testing::ScopedEnv force("CUFILE_FORCE_COMPAT_MODE", "true");
  testing::fake_cufile_script().nvfs_major = 2;
  std::vector<std::uint8_t> got;
  auto a = read_to_device(config(CompatMode::automatic), 2 * kTask, 2 * kTask, 0, &got);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->report.reasons[0].reason, Reason::cufile_forced_compat);
  auto off = read_to_device(config(CompatMode::off), 2 * kTask, 2 * kTask, 0, &got);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->report.at(Route::cufile_posix).ops, 2u);
}

TEST_F(DeviceRoutes, CuFileWriteIsByteExactAndAttributed) {
  std::string path = (dir_ / "out.bin").string();
  File f = open(path, "w", config(CompatMode::off));
  const std::uint64_t size = 5 * kTask;
  auto data = testing::pattern(0, size);
  void* dev = testing::fake_cuda_alloc_device(size);
  std::memcpy(dev, data.data(), size);
  auto r = f.pwrite(dev, size, 0).get();
  testing::fake_cuda_free(dev);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->report.at(Route::cufile_posix).ops, 5u);
  ASSERT_TRUE(r->report.cufile.has_value());
  EXPECT_EQ(r->report.cufile->posix_writes, 5u);
  auto disk = testing::read_whole_file(path);
  ASSERT_EQ(disk.size(), size);
  EXPECT_EQ(0, std::memcmp(disk.data(), data.data(), size));
}

TEST_F(DeviceRoutes, MissingCuFileLibraryIsAReasonInAutoAndAnErrorWhenOff) {
  testing::fake_cufile_script().library_present = false;
  testing::fake_cufile_script().nvfs_major = 2;  // the module is there, the library is not
  std::vector<std::uint8_t> got;
  auto a = read_to_device(config(CompatMode::automatic), 2 * kTask, 2 * kTask, 0, &got);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->report.reasons[0].reason, Reason::cufile_library_missing);
  auto off = read_to_device(config(CompatMode::off), 2 * kTask, 2 * kTask, 0, &got);
  ASSERT_THAT(off, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT(off.status().message(), HasSubstr("libcufile"));
}

}  // namespace
}  // namespace ferry
