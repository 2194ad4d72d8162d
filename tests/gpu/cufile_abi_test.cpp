// cuFile on the GPU machine: Ferry's declarations (src/platform/cufile/cufile_abi.hpp) against the real
// cufile.h where it is installed, then the real library: load, driver open, properties, handle
// registration (with cuFile's own reason when it refuses) and a read whose statistics delta must account
// for exactly the bytes read. Skips say why (no cufile.h, no libcufile, no GPU).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <type_traits>
#include <vector>

#include "support/test_files.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/cufile/cufile_abi.hpp"
#include "platform/cufile/cufile_api.hpp"
#include "platform/cufile/cufile_driver.hpp"
#include "platform/cufile/cufile_errors.hpp"
#include "platform/cufile/cufile_log.hpp"

#if __has_include(<cufile.h>) && __has_include(<cuda.h>)
#include <cuda.h>
#include <cufile.h>
#undef cuFileDriverClose  // cufile.h renames it to cuFileDriverClose_v2; Ferry names the _v2 symbol itself
#define FERRY_TEST_HAVE_CUFILE_H 1
#else
#define FERRY_TEST_HAVE_CUFILE_H 0
#endif

namespace fd = ferry::detail;
using ::testing::HasSubstr;

#if FERRY_TEST_HAVE_CUFILE_H

template <typename T>
constexpr std::size_t size_or_zero() {
  if constexpr (std::is_void_v<T>) {
    return 0;
  } else {
    return sizeof(T);
  }
}

// Argument-by-argument size comparison of two function pointer types.
template <typename R1, typename... A1, typename R2, typename... A2>
constexpr bool same_shape(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2)) {
    return false;
  } else {
    return size_or_zero<R1>() == size_or_zero<R2>() && ((sizeof(A1) == sizeof(A2)) && ...);
  }
}

TEST(CuFileAbi, StructSizesMatchTheHeader) {
  EXPECT_EQ(sizeof(fd::CUfileError_t), sizeof(::CUfileError_t));
  EXPECT_EQ(sizeof(fd::CUfileDrvProps_t), sizeof(::CUfileDrvProps_t));
  EXPECT_EQ(sizeof(fd::CUfileDescr_t), sizeof(::CUfileDescr_t));
  EXPECT_EQ(sizeof(fd::CUfileHandle_t), sizeof(::CUfileHandle_t));
  EXPECT_EQ(sizeof(fd::CUfileOpCounter_t), sizeof(::CUfileOpCounter_t));
  EXPECT_EQ(sizeof(fd::CUfileStatsLevel1_t), sizeof(::CUfileStatsLevel1_t));
  EXPECT_EQ(sizeof(fd::CUfileStatsLevel2_t), sizeof(::CUfileStatsLevel2_t));
  EXPECT_EQ(sizeof(fd::CUfilePerGpuStats_t), sizeof(::CUfilePerGpuStats_t));
  EXPECT_EQ(sizeof(fd::CUfileStatsLevel3_t), sizeof(::CUfileStatsLevel3_t));
  EXPECT_EQ(sizeof(fd::CUfileOpError), sizeof(::CUfileOpError));
  EXPECT_EQ(fd::kCuFileOpBaseError, CUFILEOP_BASE_ERR);
  EXPECT_EQ(fd::kCuFileGpuUuidLength, CUFILE_GPU_UUID_LEN);
}

#define FERRY_SAME_OFFSET_(type, field) EXPECT_EQ(offsetof(fd::type, field), offsetof(::type, field)) << #type "." #field

TEST(CuFileAbi, FieldOffsetsMatchTheHeader) {
  FERRY_SAME_OFFSET_(CUfileError_t, err);
  FERRY_SAME_OFFSET_(CUfileError_t, cu_err);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, nvfs.major_version);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, nvfs.minor_version);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, nvfs.poll_thresh_size);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, nvfs.max_direct_io_size);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, nvfs.dstatusflags);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, nvfs.dcontrolflags);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, fflags);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, max_device_cache_size);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, per_buffer_cache_size);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, max_device_pinned_mem_size);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, max_batch_io_size);
  FERRY_SAME_OFFSET_(CUfileDrvProps_t, max_batch_io_timeout_msecs);
  FERRY_SAME_OFFSET_(CUfileDescr_t, type);
  FERRY_SAME_OFFSET_(CUfileDescr_t, handle);
  FERRY_SAME_OFFSET_(CUfileDescr_t, handle.fd);
  FERRY_SAME_OFFSET_(CUfileDescr_t, fs_ops);
  FERRY_SAME_OFFSET_(CUfileStatsLevel1_t, read_ops);
  FERRY_SAME_OFFSET_(CUfileStatsLevel1_t, read_bytes);
  FERRY_SAME_OFFSET_(CUfileStatsLevel1_t, write_bytes);
  FERRY_SAME_OFFSET_(CUfileStatsLevel1_t, batch_submit_ops);
  FERRY_SAME_OFFSET_(CUfileStatsLevel1_t, last_batch_write_bytes);
  FERRY_SAME_OFFSET_(CUfileStatsLevel2_t, read_size_kb_hist);
  FERRY_SAME_OFFSET_(CUfileStatsLevel2_t, write_size_kb_hist);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, uuid);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, read_bytes);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_total_reads);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_p2p_reads);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_nvfs_reads);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_posix_reads);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_reads_err);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, writes_bytes);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_total_writes);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_p2p_writes);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_nvfs_writes);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_posix_writes);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, n_writes_err);
  FERRY_SAME_OFFSET_(CUfilePerGpuStats_t, reg_bytes);
  FERRY_SAME_OFFSET_(CUfileStatsLevel3_t, detailed);
  FERRY_SAME_OFFSET_(CUfileStatsLevel3_t, num_gpus);
  FERRY_SAME_OFFSET_(CUfileStatsLevel3_t, per_gpu_stats);
}
#undef FERRY_SAME_OFFSET_

#define FERRY_SAME_VALUE_(name) EXPECT_EQ(static_cast<long long>(fd::name), static_cast<long long>(::name)) << #name

TEST(CuFileAbi, EnumValuesMatchTheHeader) {
  FERRY_SAME_VALUE_(CU_FILE_SUCCESS);
  FERRY_SAME_VALUE_(CU_FILE_DRIVER_NOT_INITIALIZED);
  FERRY_SAME_VALUE_(CU_FILE_DRIVER_INVALID_PROPS);
  FERRY_SAME_VALUE_(CU_FILE_DRIVER_UNSUPPORTED_LIMIT);
  FERRY_SAME_VALUE_(CU_FILE_DRIVER_VERSION_MISMATCH);
  FERRY_SAME_VALUE_(CU_FILE_DRIVER_VERSION_READ_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_DRIVER_CLOSING);
  FERRY_SAME_VALUE_(CU_FILE_PLATFORM_NOT_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_IO_NOT_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_DEVICE_NOT_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_NVFS_DRIVER_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_CUDA_DRIVER_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_CUDA_POINTER_INVALID);
  FERRY_SAME_VALUE_(CU_FILE_CUDA_MEMORY_TYPE_INVALID);
  FERRY_SAME_VALUE_(CU_FILE_CUDA_POINTER_RANGE_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_CUDA_CONTEXT_MISMATCH);
  FERRY_SAME_VALUE_(CU_FILE_INVALID_MAPPING_SIZE);
  FERRY_SAME_VALUE_(CU_FILE_INVALID_MAPPING_RANGE);
  FERRY_SAME_VALUE_(CU_FILE_INVALID_FILE_TYPE);
  FERRY_SAME_VALUE_(CU_FILE_INVALID_FILE_OPEN_FLAG);
  FERRY_SAME_VALUE_(CU_FILE_DIO_NOT_SET);
  FERRY_SAME_VALUE_(CU_FILE_INVALID_VALUE);
  FERRY_SAME_VALUE_(CU_FILE_MEMORY_ALREADY_REGISTERED);
  FERRY_SAME_VALUE_(CU_FILE_MEMORY_NOT_REGISTERED);
  FERRY_SAME_VALUE_(CU_FILE_PERMISSION_DENIED);
  FERRY_SAME_VALUE_(CU_FILE_DRIVER_ALREADY_OPEN);
  FERRY_SAME_VALUE_(CU_FILE_HANDLE_NOT_REGISTERED);
  FERRY_SAME_VALUE_(CU_FILE_HANDLE_ALREADY_REGISTERED);
  FERRY_SAME_VALUE_(CU_FILE_DEVICE_NOT_FOUND);
  FERRY_SAME_VALUE_(CU_FILE_INTERNAL_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_GETNEWFD_FAILED);
  FERRY_SAME_VALUE_(CU_FILE_NVFS_SETUP_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_IO_DISABLED);
  FERRY_SAME_VALUE_(CU_FILE_BATCH_SUBMIT_FAILED);
  FERRY_SAME_VALUE_(CU_FILE_GPU_MEMORY_PINNING_FAILED);
  FERRY_SAME_VALUE_(CU_FILE_BATCH_FULL);
  FERRY_SAME_VALUE_(CU_FILE_ASYNC_NOT_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_INTERNAL_BATCH_SETUP_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_INTERNAL_BATCH_CANCEL_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_NOMEM_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_IO_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_INTERNAL_BUF_REGISTER_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_HASH_OPR_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_INVALID_CONTEXT_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_NVFS_INTERNAL_DRIVER_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_BATCH_NOCOMPAT_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_IO_MAX_ERROR);
  FERRY_SAME_VALUE_(CU_FILE_LUSTRE_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_NVME_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_NVMEOF_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_BEEGFS_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_NVME_P2P_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_SCATEFS_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_USE_POLL_MODE);
  FERRY_SAME_VALUE_(CU_FILE_ALLOW_COMPAT_MODE);
  FERRY_SAME_VALUE_(CU_FILE_DYN_ROUTING_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_BATCH_IO_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_STREAMS_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_PARALLEL_IO_SUPPORTED);
  FERRY_SAME_VALUE_(CU_FILE_HANDLE_TYPE_OPAQUE_FD);
}
#undef FERRY_SAME_VALUE_

TEST(CuFileAbi, FunctionTypesHaveTheHeadersShape) {
  // Every entry point of cufile_symbols.hpp: the exported name is the one cufile.h declares.
#define FERRY_SAME_SHAPE_(need, symbol, result, parameters) \
  EXPECT_TRUE(same_shape(fd::symbol##_fn{}, &::symbol)) << #symbol;
  FERRY_CUFILE_SYMBOLS(FERRY_SAME_SHAPE_)
#undef FERRY_SAME_SHAPE_
  EXPECT_EQ(static_cast<int>(fd::CUFILE_PARAM_FORCE_COMPAT_MODE), static_cast<int>(::CUFILE_PARAM_FORCE_COMPAT_MODE));
}

#else

TEST(CuFileAbi, MatchesCufileHeaderWhereInstalled) {
  GTEST_SKIP() << "cufile.h is not installed here (looked in FERRY_CUDA_INCLUDE_DIRS); the layout is checked on a "
                  "machine with the CUDA toolkit's GDS headers";
}

#endif

// ---- the real library ----

namespace {

struct RealCuFile {
  const fd::CudaApi* cuda = nullptr;
  const fd::CuFileApi* cufile = nullptr;
  const fd::CuFileDriver* driver = nullptr;
  std::string skip;
};

RealCuFile real_cufile() {
  RealCuFile r;
  r.cuda = fd::process_cuda_api();
  if (r.cuda == nullptr) {
    r.skip = "CUDA unusable here: " + fd::process_cuda_status().to_string();
    return r;
  }
  r.cufile = fd::process_cufile_api();
  if (r.cufile == nullptr) {
    r.skip = "cuFile unavailable: " + fd::process_cufile_status().to_string();
    return r;
  }
  if (auto s = fd::make_current(*r.cuda, 0); !s.ok()) {
    r.skip = s.to_string();
    return r;
  }
  auto driver = fd::CuFileDriver::open(*r.cufile);
  if (!driver.ok()) {
    r.skip = driver.status().to_string();
    return r;
  }
  r.driver = *driver;
  return r;
}

#define FERRY_REQUIRE_CUFILE_(r) \
  RealCuFile r = real_cufile();  \
  if (r.driver == nullptr) GTEST_SKIP() << r.skip

}  // namespace

TEST(CuFileLibrary, LoadsWithEveryOptionalSymbol) {
  const fd::CuFileApi* api = fd::process_cufile_api();
  if (api == nullptr) GTEST_SKIP() << "cuFile unavailable: " << fd::process_cufile_status().to_string();
  EXPECT_TRUE(api->missing_optional.empty()) << "missing: " << ::testing::PrintToString(api->missing_optional);
  EXPECT_TRUE(api->has_stats());
  std::cout << "loaded " << api->library << "; cuFile log at " << fd::cufile_log_path() << "\n";
}

TEST(CuFileLibrary, DriverOpensAndReportsItsProperties) {
  FERRY_REQUIRE_CUFILE_(r);
  const fd::CuFileProperties& p = r.driver->properties();
  EXPECT_TRUE(p.read_ok);
  EXPECT_GT(p.library_version, 0);
  EXPECT_GT(p.max_direct_io_kib, 0u);  // a zero here would mean the struct layout is off
  EXPECT_TRUE(r.driver->stats_status().ok()) << r.driver->stats_status().to_string();
  std::cout << "cuFile " << p.library_version << ": " << p.summary() << "; dstatusflags=0x" << std::hex
            << p.dstatusflags << " dcontrolflags=0x" << p.dcontrolflags << " fflags=0x" << p.fflags << std::dec
            << "\n";
  // Opening again gives the same driver.
  auto again = fd::CuFileDriver::open(*r.cufile);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, r.driver);
}

TEST(CuFileLibrary, ReadIntoDeviceMemoryIsAccountedByStatistics) {
  FERRY_REQUIRE_CUFILE_(r);
  namespace fs = std::filesystem;
  fs::path dir = ferry::testing::test_dir();
  std::string path = (dir / "data.bin").string();
  constexpr std::size_t kBytes = 1 << 20;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (std::size_t i = 0; i < kBytes; ++i) out.put(static_cast<char>((i * 13) & 0xff));
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) fd = ::open(path.c_str(), O_RDONLY);  // e.g. tmpfs refuses O_DIRECT
  ASSERT_GE(fd, 0);

  fd::CuFileFailure failure;
  auto handle = r.driver->register_handle(fd, path, &failure);
  if (!handle.ok()) {
    // The GPU test machine answers 5027 without a udev record for its disk: the message must say so.
    EXPECT_NE(failure.code, 0);
    EXPECT_THAT(handle.status().message(), HasSubstr("cuFileHandleRegister failed with cuFile error"));
    EXPECT_THAT(handle.status().message(), HasSubstr(fd::cufile_error_name(failure.code)));
    ::close(fd);
    GTEST_SKIP() << "cuFile refused the test file (as designed to be reported): " << handle.status().to_string()
                 << (failure.log_line.empty() ? " [no cuFile log line]" : "");
  }

  fd::CUdeviceptr device = 0;
  ASSERT_EQ(r.cuda->cuMemAlloc_v2(&device, kBytes), fd::CUDA_SUCCESS);
  auto before = r.driver->stats_snapshot(0);
  ASSERT_TRUE(before.has_value());
  auto n = r.driver->read(*handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(device)), kBytes, 0, 0, path);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, kBytes);
  auto after = r.driver->stats_snapshot(0);
  ASSERT_TRUE(after.has_value());
  ferry::CuFileCounters delta = fd::cufile_counters_delta(*before, *after);
  std::cout << "statistics delta: " << fd::cufile_counters_text(delta) << "\n";
  EXPECT_EQ(delta.read_bytes, kBytes);  // a layout error would show up here as nonsense
  EXPECT_GE(delta.nvfs_reads + delta.posix_reads + delta.p2p_reads, 1u);

  std::vector<unsigned char> back(kBytes);
  ASSERT_EQ(r.cuda->cuMemcpyDtoH_v2(back.data(), device, kBytes), fd::CUDA_SUCCESS);
  for (std::size_t i = 0; i < kBytes; i += 4093) ASSERT_EQ(back[i], static_cast<unsigned char>((i * 13) & 0xff)) << i;
  r.driver->deregister_handle(*handle);
  EXPECT_EQ(r.cuda->cuMemFree_v2(device), fd::CUDA_SUCCESS);
  ::close(fd);
}
