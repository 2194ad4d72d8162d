// The cuFile driver, opened once per process, and the calls the router and the gds backend make through it:
// properties (is nvidia-fs there? P2PDMA?), handle registration with cuFile's own reason on failure,
// reads and writes with errors in words, and cuFile's per-GPU statistics, which tell which of its routes
// (nvfs, p2p, POSIX compatibility) an operation really took.
//
// Thread safety: open() may be called from many threads; the first call opens the driver and the others
// wait for it. A CuFileDriver is immutable after open and all its methods may be called concurrently.
// cuFile's statistics are process-wide: a delta taken around one request includes concurrent requests.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ferry/route.hpp"
#include "ferry/status.hpp"
#include "platform/cufile/cufile_abi.hpp"
#include "platform/cufile/cufile_api.hpp"

namespace ferry::detail {

/// What cuFileDriverGetProperties said, in Ferry's terms.
struct CuFileProperties {
  bool read_ok = false;        // false when cuFileDriverGetProperties failed (then all below are zero)
  int library_version = 0;     // cuFileGetVersion (e.g. 1150), 0 when unknown
  unsigned nvfs_major = 0;     // nvidia-fs kernel driver version; 0.0 when the module is not loaded
  unsigned nvfs_minor = 0;
  bool nvidia_fs_loaded = false;   // nvfs version is not 0.0
  bool p2pdma_supported = false;   // PCI P2PDMA feature flag (or the older NVMe P2P status flag)
  bool allow_compat_mode = false;  // cuFile falls back to its POSIX path where it cannot go direct
  bool poll_mode = false;
  std::uint64_t poll_threshold_kib = 0;
  std::uint64_t max_direct_io_kib = 0;
  std::uint64_t max_device_cache_kib = 0;
  std::uint64_t per_buffer_cache_kib = 0;
  std::uint64_t max_device_pinned_memory_kib = 0;
  unsigned dstatusflags = 0, dcontrolflags = 0, fflags = 0;  // raw bits, for reports

  /// True when cuFile could move data without staging it through host memory (nvidia-fs or P2PDMA).
  bool direct_route_possible() const noexcept { return nvidia_fs_loaded || p2pdma_supported; }
  /// File systems and transports the driver reports support for: "nvme", "nvmeof", "lustre", ...
  std::vector<std::string> supported_storage() const;
  /// One line: "nvidia-fs 2.17, P2PDMA no, compat mode allowed, max direct I/O 16384 KiB".
  std::string summary() const;
};

/// A cuFile failure's numbers, for the router's reason detail ("handle registration failed with 5027").
struct CuFileFailure {
  int code = 0;          // CUfileOpError value (5027), or 0 when the failure was not cuFile's own code
  int cuda_code = 0;     // CUresult when code is CU_FILE_CUDA_DRIVER_ERROR
  std::string log_line;  // cuFile's own words from its log, when it wrote any
};

class CuFileDriver {
 public:
  /// The driver for `api`, opened on the first call (after preparing cuFile's log, see cufile_log.hpp) and
  /// shared by every later call with the same table; a failure is remembered too, and returned again
  /// without retrying. Opening also enables statistics (level 3) where the library has them.
  /// Errors: unavailable, "cuFileDriverOpen failed with cuFile error 5001 (...): meaning; cuFile log: ..."
  /// with the numbers in `*failure` when given.
  [[nodiscard]] static Result<const CuFileDriver*> open(const CuFileApi& api, CuFileFailure* failure = nullptr);

  /// Tests only: closes the driver opened for `api` (if any) and forgets it and any remembered failure.
  static void close_for_testing(const CuFileApi& api);

  const CuFileApi& api() const noexcept { return *api_; }
  const CuFileProperties& properties() const noexcept { return properties_; }
  /// OK when statistics were enabled; otherwise why not (missing symbols, or cuFile's refusal).
  const Status& stats_status() const noexcept { return stats_status_; }

  /// Registers `fd` (opened by the caller; O_DIRECT where cuFile should go direct). `path` is only for
  /// messages. Errors: unavailable, "cuFileHandleRegister failed with cuFile error 5027
  /// (CU_FILE_HANDLE_NOT_REGISTERED): <meaning>; cuFile log: <line>" with the numbers in `*failure`.
  [[nodiscard]] Result<CUfileHandle_t> register_handle(int fd, const std::string& path,
                                                       CuFileFailure* failure = nullptr) const;
  void deregister_handle(CUfileHandle_t handle) const;

  /// cuFileRead of `size` bytes at `file_offset` into `base + buffer_offset`. Returns the bytes read (fewer
  /// than asked only at end of file). Errors: errno failures as Status::from_errno (io_error for EIO, ...)
  /// with "Could not read N bytes at offset X from "path" via cuFile"; cuFile's own codes as io_error with
  /// the code's name and meaning.
  [[nodiscard]] Result<std::size_t> read(CUfileHandle_t handle, void* base, std::size_t size, off_t file_offset,
                                         off_t buffer_offset, const std::string& path = {}) const;
  /// cuFileWrite, the same way.
  [[nodiscard]] Result<std::size_t> write(CUfileHandle_t handle, const void* base, std::size_t size,
                                          off_t file_offset, off_t buffer_offset, const std::string& path = {}) const;

  /// cuFile's counters for GPU `gpu` (the index in cuFile's per-GPU table, which is the CUDA ordinal on
  /// single-GPU machines), or summed over all GPUs for gpu < 0. Zero counters for a GPU cuFile has not used
  /// yet. nullopt when statistics are unavailable or cuFileGetStatsL3 fails.
  std::optional<CuFileCounters> stats_snapshot(int gpu) const;

  /// cuFile's most recent words about a failure in the last `n` log lines (udev first, then errors).
  std::optional<std::string> last_log_reason(std::size_t n = 200) const;

  CuFileDriver(const CuFileDriver&) = delete;
  CuFileDriver& operator=(const CuFileDriver&) = delete;

 private:
  explicit CuFileDriver(const CuFileApi& api) : api_(&api) {}
  void read_properties();
  void enable_stats();

  const CuFileApi* api_;
  CuFileProperties properties_;
  Status stats_status_;
};

/// `after - before`, field by field; a field that went down (statistics were reset in between) counts
/// from zero, so the result is `after`'s value for it.
CuFileCounters cufile_counters_delta(const CuFileCounters& before, const CuFileCounters& after);

/// The counters Ferry reports, from one GPU's level-3 statistics.
CuFileCounters cufile_counters_from(const CUfilePerGpuStats_t& stats);

/// A registered cuFile handle, deregistered when the last user lets go.
class GdsFileHandle {
 public:
  GdsFileHandle(const CuFileDriver& driver, CUfileHandle_t handle) : driver_(&driver), handle_(handle) {}
  ~GdsFileHandle() { driver_->deregister_handle(handle_); }
  GdsFileHandle(const GdsFileHandle&) = delete;
  GdsFileHandle& operator=(const GdsFileHandle&) = delete;
  CUfileHandle_t get() const { return handle_; }

 private:
  const CuFileDriver* driver_;
  CUfileHandle_t handle_;
};

/// "nvfs=0 posix=12 p2p=0 reads, 50331648 bytes read; nvfs=0 posix=0 p2p=0 writes, 0 bytes written".
std::string cufile_counters_text(const CuFileCounters& counters);

}  // namespace ferry::detail
