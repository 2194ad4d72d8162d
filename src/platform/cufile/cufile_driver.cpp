#include "platform/cufile/cufile_driver.hpp"

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <cstdlib>
#include <mutex>

#include "base/fork_guard.hpp"
#include "platform/cufile/cufile_errors.hpp"
#include "base/setup_ledger.hpp"
#include "platform/cufile/cufile_log.hpp"
#include "report/cufile_counter_fields.hpp"

namespace ferry::detail {

namespace {

// Room past the structures for fields a newer libcufile may append: cuFile writes into what we pass.
constexpr std::size_t kStructSlack = 4096;

bool bit(unsigned flags, int number) { return ((flags >> number) & 1u) != 0; }

struct DriverEntry {
  std::unique_ptr<CuFileDriver> driver;  // set when open succeeded
  Status status;                         // the failure, when it did not
  CuFileFailure failure;
};

struct DriverRegistry {
  std::mutex mutex;
  std::map<const CuFileApi*, DriverEntry> entries;
};

DriverRegistry& registry() {
  static constinit std::atomic<DriverRegistry*> instance{nullptr};  // never destroyed: cuFile may outlive statics
  return made_once(instance, [] { return new DriverRegistry; });
}

std::string reason_since(std::uint64_t mark) {
  std::optional<std::string> reason = cufile_failure_reason(cufile_log_lines_since(mark));
  return reason ? *reason : std::string();
}

// cuFile closes its driver implicitly during static destruction, after CUDA may be gone, and that is
// known to crash processes at exit. Closing it from an atexit handler registered after cuFile and CUDA
// were loaded runs first (handlers run in reverse order of registration), while both still work.
void close_process_driver_at_exit() {
  const CuFileApi* api = process_cufile_api();
  if (api == nullptr) return;
  DriverRegistry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto found = reg.entries.find(api);
  if (found == reg.entries.end() || !found->second.driver) return;
  api->cuFileDriverClose_v2();
  // The driver object stays (leaked, as the registry is) so late users fail in cuFile, not on freed memory.
}

}  // namespace

Result<const CuFileDriver*> CuFileDriver::open(const CuFileApi& api, CuFileFailure* failure) {
  DriverRegistry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto found = reg.entries.find(&api);
  if (found != reg.entries.end()) {
    if (found->second.driver) return static_cast<const CuFileDriver*>(found->second.driver.get());
    if (failure != nullptr) *failure = found->second.failure;
    return found->second.status;
  }

  DriverEntry& entry = reg.entries[&api];
  prepare_cufile_log();
  std::uint64_t mark = cufile_log_size();
  SetupTimer timer(SetupStep::cufile_driver_open);
  CUfileError_t opened = api.cuFileDriverOpen();
  // Another component of this process (KvikIO, cuDF) may have opened it first: that is fine for us.
  if (opened.err != CU_FILE_SUCCESS && opened.err != CU_FILE_DRIVER_ALREADY_OPEN) {
    entry.failure = CuFileFailure{opened.err, opened.cu_err, reason_since(mark)};
    entry.status = cufile_status("cuFileDriverOpen", opened.err, opened.cu_err, entry.failure.log_line);
    if (failure != nullptr) *failure = entry.failure;
    return entry.status;
  }
  entry.driver.reset(new CuFileDriver(api));
  entry.driver->read_properties();
  entry.driver->enable_stats();
  if (&api == process_cufile_api()) std::atexit(close_process_driver_at_exit);
  return static_cast<const CuFileDriver*>(entry.driver.get());
}

void CuFileDriver::close_for_testing(const CuFileApi& api) {
  DriverRegistry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto found = reg.entries.find(&api);
  if (found == reg.entries.end()) return;
  if (found->second.driver) api.cuFileDriverClose_v2();
  reg.entries.erase(found);
}

void CuFileDriver::read_properties() {
  CuFileProperties& p = properties_;
  if (api_->cuFileGetVersion != nullptr) {
    int version = 0;
    if (api_->cuFileGetVersion(&version).err == CU_FILE_SUCCESS) p.library_version = version;
  }
  alignas(CUfileDrvProps_t) unsigned char storage[sizeof(CUfileDrvProps_t) + kStructSlack] = {};
  auto* raw = reinterpret_cast<CUfileDrvProps_t*>(storage);
  if (api_->cuFileDriverGetProperties(raw).err != CU_FILE_SUCCESS) return;
  CUfileDrvProps_t props;
  std::memcpy(&props, storage, sizeof props);
  p.read_ok = true;
  p.nvfs_major = props.nvfs.major_version;
  p.nvfs_minor = props.nvfs.minor_version;
  p.nvidia_fs_loaded = p.nvfs_major != 0 || p.nvfs_minor != 0;
  p.dstatusflags = props.nvfs.dstatusflags;
  p.dcontrolflags = props.nvfs.dcontrolflags;
  p.fflags = props.fflags;
  p.p2pdma_supported = bit(props.fflags, CU_FILE_P2P_SUPPORTED) || bit(props.nvfs.dstatusflags, CU_FILE_NVME_P2P_SUPPORTED);
  p.allow_compat_mode = bit(props.nvfs.dcontrolflags, CU_FILE_ALLOW_COMPAT_MODE);
  p.poll_mode = bit(props.nvfs.dcontrolflags, CU_FILE_USE_POLL_MODE);
  p.poll_threshold_kib = props.nvfs.poll_thresh_size;
  p.max_direct_io_kib = props.nvfs.max_direct_io_size;
  p.max_device_cache_kib = props.max_device_cache_size;
  p.per_buffer_cache_kib = props.per_buffer_cache_size;
  p.max_device_pinned_memory_kib = props.max_device_pinned_mem_size;
}

void CuFileDriver::enable_stats() {
  if (!api_->has_stats()) {
    std::string missing;
    for (const std::string& name : api_->missing_optional) missing += (missing.empty() ? "" : ", ") + name;
    stats_status_ = Status(ErrorCode::unavailable, api_->library + " lacks cuFile's statistics functions (" +
                                                       (missing.empty() ? "cuFileGetStatsL3" : missing) + ")");
    return;
  }
  CUfileError_t level = api_->cuFileSetStatsLevel(3);
  if (level.err != CU_FILE_SUCCESS) {
    stats_status_ = cufile_status("cuFileSetStatsLevel(3)", level.err, level.cu_err);
    return;
  }
  CUfileError_t started = api_->cuFileStatsStart();
  if (started.err != CU_FILE_SUCCESS) stats_status_ = cufile_status("cuFileStatsStart", started.err, started.cu_err);
}

Result<CUfileHandle_t> CuFileDriver::register_handle(int fd, const std::string& path, CuFileFailure* failure) const {
  CUfileDescr_t descr;
  std::memset(&descr, 0, sizeof descr);
  descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  descr.handle.fd = fd;
  descr.fs_ops = nullptr;
  CUfileHandle_t handle = nullptr;
  std::uint64_t mark = cufile_log_size();
  SetupTimer timer(SetupStep::cufile_register);
  CUfileError_t result = api_->cuFileHandleRegister(&handle, &descr);
  if (result.err == CU_FILE_SUCCESS) return handle;
  CuFileFailure details{result.err, result.cu_err, reason_since(mark)};
  if (failure != nullptr) *failure = details;
  return cufile_status("cuFileHandleRegister", details.code, details.cuda_code, details.log_line, path);
}

void CuFileDriver::deregister_handle(CUfileHandle_t handle) const {
  if (handle != nullptr) api_->cuFileHandleDeregister(handle);
}

namespace {

// cuFileRead/cuFileWrite return bytes, or -1 with errno set, or -errno, or -CUfileOpError.
Result<std::size_t> data_path_result(ssize_t result, int saved_errno, const char* verb, const char* direction,
                                     std::size_t size, off_t file_offset, const std::string& path) {
  if (result >= 0) return static_cast<std::size_t>(result);
  std::string what = std::string("Could not ") + verb + " " + std::to_string(size) + " bytes at offset " +
                     std::to_string(file_offset) + " " + direction + " \"" + path + "\" via cuFile";
  if (is_cufile_error_code(static_cast<int>(result))) {
    return cufile_status(what, static_cast<int>(-result), 0, {}, path, ErrorCode::io_error);
  }
  int sys_errno = result == -1 ? saved_errno : static_cast<int>(-result);
  if (sys_errno == 0) sys_errno = EIO;  // cuFile said -1 but left errno alone: still a failed transfer
  return Status::from_errno(sys_errno, what, path);
}

}  // namespace

Result<std::size_t> CuFileDriver::read(CUfileHandle_t handle, void* base, std::size_t size, off_t file_offset,
                                       off_t buffer_offset, const std::string& path) const {
  errno = 0;
  ssize_t result = api_->cuFileRead(handle, base, size, file_offset, buffer_offset);
  return data_path_result(result, errno, "read", "from", size, file_offset, path);
}

Result<std::size_t> CuFileDriver::write(CUfileHandle_t handle, const void* base, std::size_t size, off_t file_offset,
                                        off_t buffer_offset, const std::string& path) const {
  errno = 0;
  ssize_t result = api_->cuFileWrite(handle, base, size, file_offset, buffer_offset);
  return data_path_result(result, errno, "write", "to", size, file_offset, path);
}

std::optional<CuFileCounters> CuFileDriver::stats_snapshot(int gpu) const {
  if (!stats_status_.ok() || !api_->has_stats() || gpu >= kCuFileMaxStatsGpus) return std::nullopt;
  // 5000 bytes and more: one buffer per thread rather than one per call on the stack.
  thread_local std::unique_ptr<unsigned char[]> storage(new unsigned char[sizeof(CUfileStatsLevel3_t) + kStructSlack]);
  std::memset(storage.get(), 0, sizeof(CUfileStatsLevel3_t) + kStructSlack);
  auto* raw = reinterpret_cast<CUfileStatsLevel3_t*>(storage.get());
  if (api_->cuFileGetStatsL3(raw).err != CU_FILE_SUCCESS) return std::nullopt;
  std::uint32_t num_gpus = raw->num_gpus;
  if (num_gpus > static_cast<std::uint32_t>(kCuFileMaxStatsGpus)) num_gpus = kCuFileMaxStatsGpus;
  CuFileCounters total;
  for (std::uint32_t i = 0; i < num_gpus; ++i) {
    if (gpu >= 0 && static_cast<std::uint32_t>(gpu) != i) continue;
    CuFileCounters one = cufile_counters_from(raw->per_gpu_stats[i]);
    for (const auto& f : kCuFileCounterFields) total.*f.member += one.*f.member;
  }
  return total;
}

std::optional<std::string> CuFileDriver::last_log_reason(std::size_t n) const {
  return cufile_failure_reason(cufile_log_tail(n));
}

std::vector<std::string> CuFileProperties::supported_storage() const {
  static constexpr struct {
    int bit;
    const char* name;
  } kStorage[] = {
      {CU_FILE_LUSTRE_SUPPORTED, "lustre"},   {CU_FILE_WEKAFS_SUPPORTED, "wekafs"},
      {CU_FILE_NFS_SUPPORTED, "nfs"},         {CU_FILE_GPFS_SUPPORTED, "gpfs"},
      {CU_FILE_NVME_SUPPORTED, "nvme"},       {CU_FILE_NVMEOF_SUPPORTED, "nvmeof"},
      {CU_FILE_SCSI_SUPPORTED, "scsi"},       {CU_FILE_SCALEFLUX_CSD_SUPPORTED, "scaleflux-csd"},
      {CU_FILE_NVMESH_SUPPORTED, "nvmesh"},   {CU_FILE_BEEGFS_SUPPORTED, "beegfs"},
      {CU_FILE_NVME_P2P_SUPPORTED, "nvme-p2p"}, {CU_FILE_SCATEFS_SUPPORTED, "scatefs"},
      {CU_FILE_VIRTIOFS_SUPPORTED, "virtiofs"},
  };
  std::vector<std::string> names;
  for (const auto& s : kStorage) {
    if (bit(dstatusflags, s.bit)) names.emplace_back(s.name);
  }
  return names;
}

std::string CuFileProperties::summary() const {
  if (!read_ok) return "driver properties unavailable";
  std::string out = nvidia_fs_loaded ? "nvidia-fs " + std::to_string(nvfs_major) + "." + std::to_string(nvfs_minor)
                                     : std::string("nvidia-fs not loaded");
  out += std::string(", P2PDMA ") + (p2pdma_supported ? "yes" : "no");
  out += allow_compat_mode ? ", compat mode allowed" : ", compat mode not allowed";
  out += ", max direct I/O " + std::to_string(max_direct_io_kib) + " KiB";
  return out;
}

CuFileCounters cufile_counters_delta(const CuFileCounters& before, const CuFileCounters& after) {
  auto minus = [](std::uint64_t b, std::uint64_t a) { return a >= b ? a - b : a; };
  CuFileCounters d;
  for (const auto& f : kCuFileCounterFields) d.*f.member = minus(before.*f.member, after.*f.member);
  return d;
}

CuFileCounters cufile_counters_from(const CUfilePerGpuStats_t& stats) {
  // cuFile's per-GPU statistics (cufile_abi.hpp) field by field; every Ferry counter has one.
  static constexpr struct {
    std::uint64_t CUfilePerGpuStats_t::*from;
    std::uint64_t CuFileCounters::*to;
  } kFromStats[] = {
      {&CUfilePerGpuStats_t::n_nvfs_reads, &CuFileCounters::nvfs_reads},
      {&CUfilePerGpuStats_t::n_posix_reads, &CuFileCounters::posix_reads},
      {&CUfilePerGpuStats_t::n_p2p_reads, &CuFileCounters::p2p_reads},
      {&CUfilePerGpuStats_t::n_nvfs_writes, &CuFileCounters::nvfs_writes},
      {&CUfilePerGpuStats_t::n_posix_writes, &CuFileCounters::posix_writes},
      {&CUfilePerGpuStats_t::n_p2p_writes, &CuFileCounters::p2p_writes},
      {&CUfilePerGpuStats_t::read_bytes, &CuFileCounters::read_bytes},
      {&CUfilePerGpuStats_t::writes_bytes, &CuFileCounters::write_bytes},
      {&CUfilePerGpuStats_t::n_reads_err, &CuFileCounters::read_errors},
      {&CUfilePerGpuStats_t::n_writes_err, &CuFileCounters::write_errors},
  };
  static_assert(std::size(kFromStats) == std::size(kCuFileCounterFields));
  CuFileCounters c;
  for (const auto& f : kFromStats) c.*f.to = stats.*f.from;
  return c;
}

std::string cufile_counters_text(const CuFileCounters& c) {
  return "nvfs=" + std::to_string(c.nvfs_reads) + " posix=" + std::to_string(c.posix_reads) +
         " p2p=" + std::to_string(c.p2p_reads) + " reads, " + std::to_string(c.read_bytes) + " bytes read; nvfs=" +
         std::to_string(c.nvfs_writes) + " posix=" + std::to_string(c.posix_writes) + " p2p=" +
         std::to_string(c.p2p_writes) + " writes, " + std::to_string(c.write_bytes) + " bytes written";
}

}  // namespace ferry::detail
