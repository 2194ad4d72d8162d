// Ferry's own declarations of the cuFile types it uses, so that the library builds without cufile.h.
// Values and layouts follow cufile.h of cuFile 1.15 (CUDA 13.0). Ferry calls cuFile with these types, so
// tests/gpu/cufile_abi_test.cpp checks sizes, field offsets and values against the real header wherever it
// is installed.
//
// Names follow cufile.h inside ferry::detail, except its macros (CUFILEOP_BASE_ERR, CU_FILE_RDMA_REGISTER,
// CUFILE_GPU_UUID_LEN), which get kConstant names so that a file including both headers compiles.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "platform/cuda/cuda_abi.hpp"
#include "platform/cufile/cufile_symbols.hpp"

namespace ferry::detail {

inline constexpr int kCuFileOpBaseError = 5000;  // cufile.h: CUFILEOP_BASE_ERR
inline constexpr int kCuFileGpuUuidLength = 16;  // cufile.h: CUFILE_GPU_UUID_LEN
inline constexpr int kCuFileMaxStatsGpus = 16;   // length of CUfileStatsLevel3_t::per_gpu_stats

// cuFile's status codes. cuFileRead/cuFileWrite return their negation (or -1 with errno set).
enum CUfileOpError : int {
  CU_FILE_SUCCESS = 0,
  CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
  CU_FILE_DRIVER_INVALID_PROPS = 5002,
  CU_FILE_DRIVER_UNSUPPORTED_LIMIT = 5003,
  CU_FILE_DRIVER_VERSION_MISMATCH = 5004,
  CU_FILE_DRIVER_VERSION_READ_ERROR = 5005,
  CU_FILE_DRIVER_CLOSING = 5006,
  CU_FILE_PLATFORM_NOT_SUPPORTED = 5007,
  CU_FILE_IO_NOT_SUPPORTED = 5008,
  CU_FILE_DEVICE_NOT_SUPPORTED = 5009,
  CU_FILE_NVFS_DRIVER_ERROR = 5010,
  CU_FILE_CUDA_DRIVER_ERROR = 5011,
  CU_FILE_CUDA_POINTER_INVALID = 5012,
  CU_FILE_CUDA_MEMORY_TYPE_INVALID = 5013,
  CU_FILE_CUDA_POINTER_RANGE_ERROR = 5014,
  CU_FILE_CUDA_CONTEXT_MISMATCH = 5015,
  CU_FILE_INVALID_MAPPING_SIZE = 5016,
  CU_FILE_INVALID_MAPPING_RANGE = 5017,
  CU_FILE_INVALID_FILE_TYPE = 5018,
  CU_FILE_INVALID_FILE_OPEN_FLAG = 5019,
  CU_FILE_DIO_NOT_SET = 5020,
  // 5021 is unused.
  CU_FILE_INVALID_VALUE = 5022,
  CU_FILE_MEMORY_ALREADY_REGISTERED = 5023,
  CU_FILE_MEMORY_NOT_REGISTERED = 5024,
  CU_FILE_PERMISSION_DENIED = 5025,
  CU_FILE_DRIVER_ALREADY_OPEN = 5026,
  CU_FILE_HANDLE_NOT_REGISTERED = 5027,
  CU_FILE_HANDLE_ALREADY_REGISTERED = 5028,
  CU_FILE_DEVICE_NOT_FOUND = 5029,
  CU_FILE_INTERNAL_ERROR = 5030,
  CU_FILE_GETNEWFD_FAILED = 5031,
  // 5032 is unused.
  CU_FILE_NVFS_SETUP_ERROR = 5033,
  CU_FILE_IO_DISABLED = 5034,
  CU_FILE_BATCH_SUBMIT_FAILED = 5035,
  CU_FILE_GPU_MEMORY_PINNING_FAILED = 5036,
  CU_FILE_BATCH_FULL = 5037,
  CU_FILE_ASYNC_NOT_SUPPORTED = 5038,
  CU_FILE_INTERNAL_BATCH_SETUP_ERROR = 5039,
  CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR = 5040,
  CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR = 5041,
  CU_FILE_INTERNAL_BATCH_CANCEL_ERROR = 5042,
  CU_FILE_NOMEM_ERROR = 5043,
  CU_FILE_IO_ERROR = 5044,
  CU_FILE_INTERNAL_BUF_REGISTER_ERROR = 5045,
  CU_FILE_HASH_OPR_ERROR = 5046,
  CU_FILE_INVALID_CONTEXT_ERROR = 5047,
  CU_FILE_NVFS_INTERNAL_DRIVER_ERROR = 5048,
  CU_FILE_BATCH_NOCOMPAT_ERROR = 5049,
  CU_FILE_IO_MAX_ERROR = 5050,
};

// What most cuFile calls return: the cuFile code, and the CUDA result when err is CU_FILE_CUDA_DRIVER_ERROR.
struct CUfileError_t {
  CUfileOpError err;
  CUresult cu_err;
};

// Bit numbers in CUfileDrvProps_t::nvfs.dstatusflags: file systems / transports the driver supports.
enum CUfileDriverStatusFlags : int {
  CU_FILE_LUSTRE_SUPPORTED = 0,
  CU_FILE_WEKAFS_SUPPORTED = 1,
  CU_FILE_NFS_SUPPORTED = 2,
  CU_FILE_GPFS_SUPPORTED = 3,
  CU_FILE_NVME_SUPPORTED = 4,
  CU_FILE_NVMEOF_SUPPORTED = 5,
  CU_FILE_SCSI_SUPPORTED = 6,
  CU_FILE_SCALEFLUX_CSD_SUPPORTED = 7,
  CU_FILE_NVMESH_SUPPORTED = 8,
  CU_FILE_BEEGFS_SUPPORTED = 9,
  CU_FILE_NVME_P2P_SUPPORTED = 11,  // deprecated by NVIDIA as a P2PDMA test; still read as a hint
  CU_FILE_SCATEFS_SUPPORTED = 12,
  CU_FILE_VIRTIOFS_SUPPORTED = 13,  // newer than 1.15's header, harmless as a bit number
};

// Bit numbers in CUfileDrvProps_t::nvfs.dcontrolflags.
enum CUfileDriverControlFlags : int {
  CU_FILE_USE_POLL_MODE = 0,
  CU_FILE_ALLOW_COMPAT_MODE = 1,
};

// Bit numbers in CUfileDrvProps_t::fflags.
enum CUfileFeatureFlags : int {
  CU_FILE_DYN_ROUTING_SUPPORTED = 0,
  CU_FILE_BATCH_IO_SUPPORTED = 1,
  CU_FILE_STREAMS_SUPPORTED = 2,
  CU_FILE_PARALLEL_IO_SUPPORTED = 3,
  CU_FILE_P2P_SUPPORTED = 4,  // PCI P2PDMA; documented for cuFile after 1.15, zero where unknown
};

struct CUfileDrvProps_t {
  struct {
    unsigned int major_version;  // nvidia-fs kernel driver version; 0.0 when the module is not loaded
    unsigned int minor_version;
    std::size_t poll_thresh_size;    // KiB
    std::size_t max_direct_io_size;  // KiB
    unsigned int dstatusflags;       // CUfileDriverStatusFlags bits
    unsigned int dcontrolflags;      // CUfileDriverControlFlags bits
  } nvfs;
  unsigned int fflags;  // CUfileFeatureFlags bits
  unsigned int max_device_cache_size;       // KiB
  unsigned int per_buffer_cache_size;       // KiB
  unsigned int max_device_pinned_mem_size;  // KiB
  unsigned int max_batch_io_size;
  unsigned int max_batch_io_timeout_msecs;
};

enum CUfileFileHandleType : int {
  CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1,
  CU_FILE_HANDLE_TYPE_OPAQUE_WIN32 = 2,
  CU_FILE_HANDLE_TYPE_USERSPACE_FS = 3,
};

struct CUfileFSOps_t;  // user-space file system operations; Ferry passes none

struct CUfileDescr_t {
  CUfileFileHandleType type;
  union {
    int fd;
    void* handle;
  } handle;
  const CUfileFSOps_t* fs_ops;
};

using CUfileHandle_t = void*;

// Statistics (cuFileSetStatsLevel / cuFileGetStatsL1..L3).
struct CUfileOpCounter_t {
  std::uint64_t ok;
  std::uint64_t err;
};

struct CUfileStatsLevel1_t {
  CUfileOpCounter_t read_ops;
  CUfileOpCounter_t write_ops;
  CUfileOpCounter_t hdl_register_ops;
  CUfileOpCounter_t hdl_deregister_ops;
  CUfileOpCounter_t buf_register_ops;
  CUfileOpCounter_t buf_deregister_ops;
  std::uint64_t read_bytes;
  std::uint64_t write_bytes;
  std::uint64_t read_bw_bytes_per_sec;
  std::uint64_t write_bw_bytes_per_sec;
  std::uint64_t read_lat_avg_us;
  std::uint64_t write_lat_avg_us;
  std::uint64_t read_ops_per_sec;
  std::uint64_t write_ops_per_sec;
  std::uint64_t read_lat_sum_us;
  std::uint64_t write_lat_sum_us;
  CUfileOpCounter_t batch_submit_ops;
  CUfileOpCounter_t batch_complete_ops;
  CUfileOpCounter_t batch_setup_ops;
  CUfileOpCounter_t batch_cancel_ops;
  CUfileOpCounter_t batch_destroy_ops;
  CUfileOpCounter_t batch_enqueued_ops;
  CUfileOpCounter_t batch_posix_enqueued_ops;
  CUfileOpCounter_t batch_processed_ops;
  CUfileOpCounter_t batch_posix_processed_ops;
  CUfileOpCounter_t batch_nvfs_submit_ops;
  CUfileOpCounter_t batch_p2p_submit_ops;
  CUfileOpCounter_t batch_aio_submit_ops;
  CUfileOpCounter_t batch_iouring_submit_ops;
  CUfileOpCounter_t batch_mixed_io_submit_ops;
  CUfileOpCounter_t batch_total_submit_ops;
  std::uint64_t batch_read_bytes;
  std::uint64_t batch_write_bytes;
  std::uint64_t batch_read_bw_bytes;
  std::uint64_t batch_write_bw_bytes;
  std::uint64_t batch_submit_lat_avg_us;
  std::uint64_t batch_completion_lat_avg_us;
  std::uint64_t batch_submit_ops_per_sec;
  std::uint64_t batch_complete_ops_per_sec;
  std::uint64_t batch_submit_lat_sum_us;
  std::uint64_t batch_completion_lat_sum_us;
  std::uint64_t last_batch_read_bytes;
  std::uint64_t last_batch_write_bytes;
};

struct CUfileStatsLevel2_t {
  CUfileStatsLevel1_t basic;
  std::uint64_t read_size_kb_hist[32];
  std::uint64_t write_size_kb_hist[32];
};

struct CUfilePerGpuStats_t {
  char uuid[kCuFileGpuUuidLength];
  std::uint64_t read_bytes;
  std::uint64_t read_bw_bytes_per_sec;
  std::uint64_t read_utilization;
  std::uint64_t read_duration_us;
  std::uint64_t n_total_reads;
  std::uint64_t n_p2p_reads;
  std::uint64_t n_nvfs_reads;
  std::uint64_t n_posix_reads;
  std::uint64_t n_unaligned_reads;
  std::uint64_t n_dr_reads;
  std::uint64_t n_sparse_regions;
  std::uint64_t n_inline_regions;
  std::uint64_t n_reads_err;
  std::uint64_t writes_bytes;  // sic: "writes_bytes" in cufile.h
  std::uint64_t write_bw_bytes_per_sec;
  std::uint64_t write_utilization;
  std::uint64_t write_duration_us;
  std::uint64_t n_total_writes;
  std::uint64_t n_p2p_writes;
  std::uint64_t n_nvfs_writes;
  std::uint64_t n_posix_writes;
  std::uint64_t n_unaligned_writes;
  std::uint64_t n_dr_writes;
  std::uint64_t n_writes_err;
  std::uint64_t n_mmap;
  std::uint64_t n_mmap_ok;
  std::uint64_t n_mmap_err;
  std::uint64_t n_mmap_free;
  std::uint64_t reg_bytes;
};

struct CUfileStatsLevel3_t {
  CUfileStatsLevel2_t detailed;
  std::uint32_t num_gpus;
  CUfilePerGpuStats_t per_gpu_stats[kCuFileMaxStatsGpus];
};

// Layout facts as read from cufile.h 1.15 (x86_64 and aarch64, LP64), checked again in the ABI test.
static_assert(sizeof(CUfileError_t) == 8);
static_assert(sizeof(CUfileDrvProps_t) == 56);
static_assert(sizeof(CUfileDescr_t) == 24);
static_assert(sizeof(CUfileStatsLevel1_t) == 512);
static_assert(sizeof(CUfileStatsLevel2_t) == 1024);
static_assert(sizeof(CUfilePerGpuStats_t) == 248);
static_assert(sizeof(CUfileStatsLevel3_t) == 5000);

// cuFile's boolean parameters (cuFileGetParameterBool, cuFile 1.14+); only the one Ferry asks about.
enum CUFileBoolConfigParameter_t : int {
  CUFILE_PARAM_FORCE_COMPAT_MODE = 2,
};

// Function types, one per exported symbol Ferry loads (`cuFileRead_fn`), from the list in cufile_symbols.hpp.
#define FERRY_CUFILE_FUNCTION_TYPE_(need, symbol, result, parameters) using symbol##_fn = result(*) parameters;
FERRY_CUFILE_SYMBOLS(FERRY_CUFILE_FUNCTION_TYPE_)
#undef FERRY_CUFILE_FUNCTION_TYPE_

}  // namespace ferry::detail
