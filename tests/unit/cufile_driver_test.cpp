#include "platform/cufile/cufile_driver.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "platform/cufile/cufile_errors.hpp"
#include "platform/cufile/cufile_log.hpp"
#include "support/fake_cufile.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace fd = ferry::detail;
namespace ft = ferry::testing;
using ::testing::HasSubstr;

namespace {

class CuFileDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ft::reset_fake_cufile();
    // A directory per test: CTest runs this fixture's tests as parallel processes, and a shared data.bin
    // was truncated and rewritten by one test while another read it (zeros, seen twice).
    dir_ = ferry::testing::test_dir();
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    ft::reset_fake_cufile();
  }

  const fd::CuFileApi& api() {
    auto api = ft::fake_cufile_api();
    EXPECT_TRUE(api.ok()) << api.status().to_string();
    return **api;
  }

  // A file of `bytes` bytes where byte i is (i % 251), opened read-write.
  int make_file(std::size_t bytes) {
    path_ = (dir_ / "data.bin").string();
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    for (std::size_t i = 0; i < bytes; ++i) out.put(static_cast<char>(i % 251));
    out.close();
    fd_ = ::open(path_.c_str(), O_RDWR);
    return fd_;
  }

  std::filesystem::path dir_;
  std::string path_;
  int fd_ = -1;
};

}  // namespace

TEST_F(CuFileDriverTest, OpensOncePerProcessFromManyThreads) {
  const fd::CuFileApi& table = api();
  std::vector<std::thread> threads;
  std::vector<const fd::CuFileDriver*> drivers(8, nullptr);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto d = fd::CuFileDriver::open(table);
      if (d.ok()) drivers[i] = *d;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto* d : drivers) {
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d, drivers[0]);
  }
  EXPECT_EQ(ft::fake_cufile_counters().driver_opens, 1u);
}

TEST_F(CuFileDriverTest, OpenFailureIsRememberedWithItsCode) {
  ft::fake_cufile_script().driver_open_error = fd::CU_FILE_DRIVER_NOT_INITIALIZED;
  ft::fake_cufile_script().driver_open_log_line = "nvidia-fs.ko driver not loaded";
  fd::CuFileFailure failure;
  auto first = fd::CuFileDriver::open(api(), &failure);
  ASSERT_THAT(first, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT(first.status().message(),
              HasSubstr("cuFileDriverOpen failed with cuFile error 5001 (CU_FILE_DRIVER_NOT_INITIALIZED)"));
  EXPECT_EQ(failure.code, 5001);
  EXPECT_THAT(failure.log_line, HasSubstr("nvidia-fs.ko driver not loaded"));

  fd::CuFileFailure again;
  auto second = fd::CuFileDriver::open(api(), &again);
  ASSERT_THAT(second, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_EQ(again.code, 5001);
  EXPECT_EQ(ft::fake_cufile_counters().driver_opens, 1u);  // not retried
}

TEST_F(CuFileDriverTest, PropertiesSayWhetherCuFileCanGoDirect) {
  auto driver = fd::CuFileDriver::open(api());
  ASSERT_TRUE(driver.ok()) << driver.status().to_string();
  const fd::CuFileProperties& p = (*driver)->properties();
  EXPECT_TRUE(p.read_ok);
  EXPECT_EQ(p.library_version, 1150);
  EXPECT_FALSE(p.nvidia_fs_loaded);  // the GPU test machine's situation
  EXPECT_FALSE(p.p2pdma_supported);
  EXPECT_FALSE(p.direct_route_possible());
  EXPECT_TRUE(p.allow_compat_mode);
  EXPECT_EQ(p.max_direct_io_kib, 16384u);
  EXPECT_THAT(p.summary(), HasSubstr("nvidia-fs not loaded"));
}

TEST_F(CuFileDriverTest, NvidiaFsAndP2pdmaAreSeen) {
  ft::fake_cufile_script().nvfs_major = 2;
  ft::fake_cufile_script().nvfs_minor = 17;
  ft::fake_cufile_script().p2pdma = true;
  auto driver = fd::CuFileDriver::open(api());
  ASSERT_TRUE(driver.ok());
  const fd::CuFileProperties& p = (*driver)->properties();
  EXPECT_TRUE(p.nvidia_fs_loaded);
  EXPECT_TRUE(p.p2pdma_supported);
  EXPECT_TRUE(p.direct_route_possible());
  EXPECT_THAT(p.summary(), HasSubstr("nvidia-fs 2.17, P2PDMA yes"));
  EXPECT_THAT(p.supported_storage(), ::testing::Contains("nvme"));
}

TEST_F(CuFileDriverTest, RegisterFailureCarriesCode5027TheMeaningAndCuFilesOwnWords) {
  ft::fake_cufile_script().handle_register_error = 5027;
  ft::fake_cufile_script().handle_register_log_line = "udev property not found: ID_FS_USAGE /dev/vda1";
  auto driver = fd::CuFileDriver::open(api());
  ASSERT_TRUE(driver.ok());
  ASSERT_GE(make_file(4096), 0);
  fd::CuFileFailure failure;
  auto handle = (*driver)->register_handle(fd_, path_, &failure);
  ASSERT_THAT(handle, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_EQ(failure.code, 5027);
  EXPECT_THAT(failure.log_line, HasSubstr("udev property not found: ID_FS_USAGE"));
  const ferry::Status& s = handle.status();
  EXPECT_EQ(s.code(), ferry::ErrorCode::unavailable);
  EXPECT_EQ(s.path(), path_);
  EXPECT_THAT(s.message(), HasSubstr("cuFileHandleRegister failed with cuFile error 5027 (CU_FILE_HANDLE_NOT_REGISTERED)"));
  EXPECT_THAT(s.message(), HasSubstr(fd::cufile_error_meaning(5027)));
  EXPECT_THAT(s.message(), HasSubstr("cuFile log: "));
  EXPECT_THAT((*driver)->last_log_reason().value_or(""), HasSubstr("ID_FS_USAGE"));
}

TEST_F(CuFileDriverTest, ReadsCountUnderTheRouteCuFileTook) {
  ft::fake_cufile_script().read_route = ft::FakeCuFileRoute::posix;
  auto driver = fd::CuFileDriver::open(api());
  ASSERT_TRUE(driver.ok());
  ASSERT_TRUE((*driver)->stats_status().ok()) << (*driver)->stats_status().to_string();
  ASSERT_GE(make_file(1 << 16), 0);
  auto handle = (*driver)->register_handle(fd_, path_);
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();

  auto before = (*driver)->stats_snapshot(0);
  ASSERT_TRUE(before.has_value());
  std::vector<unsigned char> buffer(8192);
  auto n = (*driver)->read(*handle, buffer.data(), 4096, 8192, 4096, path_);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 4096u);
  unsigned char direct = 0;
  ASSERT_EQ(::pread(fd_, &direct, 1, 8192), 1);
  EXPECT_EQ(direct, 8192 % 251) << "the file itself reads back wrong at offset 8192";
  EXPECT_EQ(buffer[4096], 8192 % 251) << "the fake cuFileRead did not deliver the file's bytes";
  auto after = (*driver)->stats_snapshot(0);
  ASSERT_TRUE(after.has_value());
  ferry::CuFileCounters delta = fd::cufile_counters_delta(*before, *after);
  EXPECT_EQ(delta.posix_reads, 1u);
  EXPECT_EQ(delta.nvfs_reads, 0u);
  EXPECT_EQ(delta.p2p_reads, 0u);
  EXPECT_EQ(delta.read_bytes, 4096u);
  (*driver)->deregister_handle(*handle);
  EXPECT_EQ(ft::fake_cufile_counters().live_handles, 0u);
}

TEST_F(CuFileDriverTest, WritesGoThroughAndAreCounted) {
  ft::fake_cufile_script().write_route = ft::FakeCuFileRoute::nvfs;
  auto driver = fd::CuFileDriver::open(api());
  ASSERT_TRUE(driver.ok());
  ASSERT_GE(make_file(4096), 0);
  auto handle = (*driver)->register_handle(fd_, path_);
  ASSERT_TRUE(handle.ok());
  std::vector<unsigned char> data(512, 0x5a);
  auto n = (*driver)->write(*handle, data.data(), 512, 1024, 0, path_);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 512u);
  unsigned char byte = 0;
  ASSERT_EQ(::pread(fd_, &byte, 1, 1024), 1);
  EXPECT_EQ(byte, 0x5a);
  auto stats = (*driver)->stats_snapshot(-1);
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->nvfs_writes, 1u);
  EXPECT_EQ(stats->write_bytes, 512u);
  (*driver)->deregister_handle(*handle);
}

TEST_F(CuFileDriverTest, ReadErrorsSayWhetherCuFileOrTheFileSystemFailed) {
  auto driver = fd::CuFileDriver::open(api());
  ASSERT_TRUE(driver.ok());
  ASSERT_GE(make_file(4096), 0);
  auto handle = (*driver)->register_handle(fd_, path_);
  ASSERT_TRUE(handle.ok());
  std::vector<unsigned char> buffer(4096);

  ft::fake_cufile_script().forced_io_result = -fd::CU_FILE_IO_ERROR;
  auto cufile_error = (*driver)->read(*handle, buffer.data(), 4096, 0, 0, path_);
  ASSERT_THAT(cufile_error, StatusIs(ferry::ErrorCode::io_error));
  EXPECT_THAT(cufile_error.status().message(), HasSubstr("Could not read 4096 bytes at offset 0 from \"" + path_));
  EXPECT_THAT(cufile_error.status().message(), HasSubstr("cuFile error 5044 (CU_FILE_IO_ERROR)"));

  ft::fake_cufile_script().forced_io_result = -1;
  ft::fake_cufile_script().forced_io_errno = EIO;
  auto errno_error = (*driver)->read(*handle, buffer.data(), 4096, 0, 0, path_);
  ASSERT_THAT(errno_error, StatusIs(ferry::ErrorCode::io_error));
  EXPECT_EQ(errno_error.status().sys_errno(), EIO);

  ft::fake_cufile_script().forced_io_result = -ENOSPC;  // some versions return -errno directly
  auto negative_errno = (*driver)->write(*handle, buffer.data(), 4096, 0, 0, path_);
  ASSERT_THAT(negative_errno, StatusIs(ferry::ErrorCode::no_space));
  EXPECT_EQ(negative_errno.status().sys_errno(), ENOSPC);
  EXPECT_THAT(negative_errno.status().message(), HasSubstr("Could not write 4096 bytes at offset 0 to"));
  (*driver)->deregister_handle(*handle);
}

TEST_F(CuFileDriverTest, WithoutStatisticsSnapshotsAreEmptyAndSaySo) {
  ft::fake_cufile_script().missing_symbols = {"cuFileGetStatsL3"};
  auto driver = fd::CuFileDriver::open(api());
  ASSERT_TRUE(driver.ok());
  EXPECT_THAT((*driver)->stats_status(), StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT((*driver)->stats_status().message(), HasSubstr("cuFileGetStatsL3"));
  EXPECT_FALSE((*driver)->stats_snapshot(0).has_value());
}

TEST_F(CuFileDriverTest, StatsLevelRefusalIsReported) {
  ft::fake_cufile_script().stats_level_error = fd::CU_FILE_INVALID_VALUE;
  auto driver = fd::CuFileDriver::open(api());
  ASSERT_TRUE(driver.ok());
  EXPECT_THAT((*driver)->stats_status().message(), HasSubstr("cuFileSetStatsLevel(3) failed with cuFile error 5022"));
}

TEST_F(CuFileDriverTest, SnapshotSumsGpusAndCountsOtherActivity) {
  auto driver = fd::CuFileDriver::open(api());
  ASSERT_TRUE(driver.ok());
  ft::fake_cufile_add_reads(ft::FakeCuFileRoute::nvfs, 3, 300, 0);
  ft::fake_cufile_add_reads(ft::FakeCuFileRoute::p2p, 2, 200, 1);
  EXPECT_EQ((*driver)->stats_snapshot(0)->nvfs_reads, 3u);
  EXPECT_EQ((*driver)->stats_snapshot(1)->p2p_reads, 2u);
  EXPECT_EQ((*driver)->stats_snapshot(5)->read_bytes, 0u);  // a GPU cuFile has not used yet
  auto all = (*driver)->stats_snapshot(-1);
  EXPECT_EQ(all->read_bytes, 500u);
  EXPECT_FALSE((*driver)->stats_snapshot(16).has_value());
}

TEST(CuFileCounters, DeltaSubtractsFieldByField) {
  ferry::CuFileCounters before{10, 20, 30, 1, 2, 3, 1000, 2000, 0, 1};
  ferry::CuFileCounters after{15, 20, 31, 1, 5, 3, 5096, 2000, 2, 1};
  ferry::CuFileCounters d = fd::cufile_counters_delta(before, after);
  EXPECT_EQ(d.nvfs_reads, 5u);
  EXPECT_EQ(d.posix_reads, 0u);
  EXPECT_EQ(d.p2p_reads, 1u);
  EXPECT_EQ(d.posix_writes, 3u);
  EXPECT_EQ(d.read_bytes, 4096u);
  EXPECT_EQ(d.read_errors, 2u);
}

TEST(CuFileCounters, DeltaAfterAResetCountsFromZero) {
  ferry::CuFileCounters before{10, 20, 0, 0, 0, 0, 1000, 0, 0, 0};
  ferry::CuFileCounters after{2, 25, 0, 0, 0, 0, 100, 0, 0, 0};
  ferry::CuFileCounters d = fd::cufile_counters_delta(before, after);
  EXPECT_EQ(d.nvfs_reads, 2u);   // went down: reset in between
  EXPECT_EQ(d.posix_reads, 5u);
  EXPECT_EQ(d.read_bytes, 100u);
}

TEST(CuFileCounters, TextNamesEveryRoute) {
  ferry::CuFileCounters c{0, 12, 0, 0, 0, 0, 50331648, 0, 0, 0};
  EXPECT_EQ(fd::cufile_counters_text(c),
            "nvfs=0 posix=12 p2p=0 reads, 50331648 bytes read; nvfs=0 posix=0 p2p=0 writes, 0 bytes written");
}

TEST(CuFileLog, PointsCuFileAtAPerProcessFileUnlessTheUserChose) {
  const char* before = std::getenv(fd::kCuFileLogVariable);
  std::string path = fd::cufile_log_path();
  const char* now = std::getenv(fd::kCuFileLogVariable);
  ASSERT_NE(now, nullptr);
  EXPECT_EQ(path, now);
  if (before == nullptr || path.find("ferry-cufile-") != std::string::npos) {
    EXPECT_THAT(path, HasSubstr("/ferry-cufile-" + std::to_string(::getpid()) + "-"));
    EXPECT_THAT(path, ::testing::EndsWith("/cufile.log"));
  }
}

TEST(CuFileLog, FindsTheNewestUdevLineBeforeOtherErrors) {
  std::vector<std::string> lines = {
      "INFO  cufio:1 starting",
      "ERROR cufio-udev:2 udev property not found: ID_FS_USAGE /dev/vda1",
      "ERROR cufio-fs:3 something else failed",
  };
  EXPECT_THAT(fd::cufile_failure_reason(lines).value_or(""), HasSubstr("ID_FS_USAGE"));
  EXPECT_EQ(fd::find_log_line(lines, {"fs:3"}).value_or(""), lines[2]);
  EXPECT_FALSE(fd::find_log_line(lines, {"nothing like this"}).has_value());
}

TEST(CuFileApi, MissingLibraryListsEveryNameTried) {
  auto api = fd::CuFileApi::load("libferry-no-such-cufile.so.0");
  ASSERT_THAT(api, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT(api.status().message(), HasSubstr("libferry-no-such-cufile.so.0 not found: "));
  if (fd::process_cufile_api() == nullptr) {
    std::string why = fd::process_cufile_status().message();
    EXPECT_THAT(why, HasSubstr("libcufile.so.0"));
    EXPECT_THAT(why, HasSubstr("/usr/local/cuda/lib64/libcufile.so.0"));
  }
}

TEST(CuFileApi, FakeLibraryCanBeAbsent) {
  ft::reset_fake_cufile();
  ft::fake_cufile_script().library_present = false;
  auto api = ft::fake_cufile_api();
  ASSERT_THAT(api, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT(api.status().message(), HasSubstr("libcufile.so.0 not found"));
  ft::reset_fake_cufile();
}
