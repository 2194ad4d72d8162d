#include "support/fake_cufile.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include "platform/cufile/cufile_driver.hpp"
#include "platform/dynamic_library.hpp"

namespace ferry::testing {

using namespace ferry::detail;

namespace {

struct State {
  std::mutex mutex;
  FakeCuFileScript script;
  FakeCuFileCounters counters;
  std::map<CUfileHandle_t, int> handles;  // handle -> fd
  CUfileStatsLevel3_t stats{};
  bool driver_open = false;
  int next_handle = 1;
};

State& state() {
  static State* s = new State;
  return *s;
}

CUfileError_t ok() { return CUfileError_t{CU_FILE_SUCCESS, CUDA_SUCCESS}; }
CUfileError_t error(int code, int cuda = 0) {
  return CUfileError_t{static_cast<CUfileOpError>(code), static_cast<CUresult>(cuda)};
}

// Appends a line the way cuFile writes its log: time, pid/tid, level, source, words.
void write_log_line(const std::string& words) {
  if (words.empty()) return;
  const char* path = std::getenv("CUFILE_LOGFILE_PATH");
  if (path == nullptr || *path == '\0') return;
  std::ofstream out(path, std::ios::app);
  out << " 01-01-2025 00:00:00:000 [pid:" << ::getpid() << " tid:" << ::syscall(SYS_gettid)
      << "] ERROR  fake-cufile:1 " << words << "\n";
}

CUfilePerGpuStats_t& gpu_stats(State& s, int gpu) {
  if (gpu < 0 || gpu >= kCuFileMaxStatsGpus) gpu = 0;
  s.stats.num_gpus = std::max<std::uint32_t>(s.stats.num_gpus, static_cast<std::uint32_t>(gpu + 1));
  return s.stats.per_gpu_stats[gpu];
}

void count_read(State& s, FakeCuFileRoute route, std::uint64_t ops, std::uint64_t bytes, int gpu) {
  CUfilePerGpuStats_t& g = gpu_stats(s, gpu);
  g.n_total_reads += ops;
  g.read_bytes += bytes;
  switch (route) {
    case FakeCuFileRoute::nvfs: g.n_nvfs_reads += ops; break;
    case FakeCuFileRoute::posix: g.n_posix_reads += ops; break;
    case FakeCuFileRoute::p2p: g.n_p2p_reads += ops; break;
  }
  s.stats.detailed.basic.read_ops.ok += ops;
  s.stats.detailed.basic.read_bytes += bytes;
}

void count_write(State& s, FakeCuFileRoute route, std::uint64_t bytes, int gpu) {
  CUfilePerGpuStats_t& g = gpu_stats(s, gpu);
  g.n_total_writes += 1;
  g.writes_bytes += bytes;
  switch (route) {
    case FakeCuFileRoute::nvfs: g.n_nvfs_writes += 1; break;
    case FakeCuFileRoute::posix: g.n_posix_writes += 1; break;
    case FakeCuFileRoute::p2p: g.n_p2p_writes += 1; break;
  }
  s.stats.detailed.basic.write_ops.ok += 1;
  s.stats.detailed.basic.write_bytes += bytes;
}

// ---- entry points ----

CUfileError_t fake_cuFileDriverOpen() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.counters.driver_opens;
  if (s.script.driver_open_error != 0) {
    write_log_line(s.script.driver_open_log_line);
    return error(s.script.driver_open_error, s.script.driver_open_cuda_error);
  }
  if (s.driver_open) return error(CU_FILE_DRIVER_ALREADY_OPEN);
  s.driver_open = true;
  return ok();
}

// Named after the _v2 symbol its table member holds, as the generated table expects.
CUfileError_t fake_cuFileDriverClose_v2() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.counters.driver_closes;
  if (!s.driver_open) return error(CU_FILE_DRIVER_NOT_INITIALIZED);
  s.driver_open = false;
  return ok();
}

CUfileError_t fake_cuFileDriverGetProperties(CUfileDrvProps_t* props) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.driver_open) return error(CU_FILE_DRIVER_NOT_INITIALIZED);
  std::memset(props, 0, sizeof *props);
  props->nvfs.major_version = s.script.nvfs_major;
  props->nvfs.minor_version = s.script.nvfs_minor;
  props->nvfs.max_direct_io_size = s.script.max_direct_io_kib;
  props->nvfs.poll_thresh_size = 4;
  props->nvfs.dstatusflags = s.script.nvfs_major != 0 ? (1u << CU_FILE_NVME_SUPPORTED) : 0u;
  props->nvfs.dcontrolflags = s.script.allow_compat_mode ? (1u << CU_FILE_ALLOW_COMPAT_MODE) : 0u;
  props->fflags = (1u << CU_FILE_BATCH_IO_SUPPORTED) | (s.script.p2pdma ? (1u << CU_FILE_P2P_SUPPORTED) : 0u);
  props->max_device_cache_size = 131072;
  props->per_buffer_cache_size = 1024;
  props->max_device_pinned_mem_size = 33554432;
  return ok();
}

CUfileError_t fake_cuFileHandleRegister(CUfileHandle_t* handle, CUfileDescr_t* descr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.counters.handle_registers;
  if (descr == nullptr || descr->type != CU_FILE_HANDLE_TYPE_OPAQUE_FD || descr->handle.fd < 0) {
    return error(CU_FILE_INVALID_VALUE);
  }
  if (s.script.handle_register_error != 0) {
    write_log_line(s.script.handle_register_log_line);
    return error(s.script.handle_register_error);
  }
  for (const auto& [h, fd] : s.handles) {
    if (fd == descr->handle.fd) return error(CU_FILE_HANDLE_ALREADY_REGISTERED);
  }
  // Handles are opaque to callers: any distinct non-null value will do.
  *handle = reinterpret_cast<CUfileHandle_t>(static_cast<std::uintptr_t>(0x1000 + s.next_handle++));
  s.handles[*handle] = descr->handle.fd;
  ++s.counters.live_handles;
  return ok();
}

void fake_cuFileHandleDeregister(CUfileHandle_t handle) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.counters.handle_deregisters;
  if (s.handles.erase(handle) != 0) --s.counters.live_handles;
}

// Looks up the descriptor and the forced result under the lock; the transfer itself runs outside it.
bool prepare_io(CUfileHandle_t handle, int* fd, ssize_t* forced, int* forced_errno, FakeCuFileRoute* route,
                int* gpu, bool reading) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.handles.find(handle);
  if (it == s.handles.end()) return false;
  *fd = it->second;
  *forced = s.script.forced_io_result;
  *forced_errno = s.script.forced_io_errno;
  *route = reading ? s.script.read_route : s.script.write_route;
  *gpu = s.script.gpu;
  return true;
}

// cuFile's POSIX path copes with O_DIRECT descriptors and unaligned buffers through its own bounce
// buffers; the fake gets the same effect by doing its I/O on a buffered twin of the registered descriptor.
int buffered_twin(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || !(flags & O_DIRECT)) return ::dup(fd);
  std::string self = "/proc/self/fd/" + std::to_string(fd);
  return ::open(self.c_str(), (flags & O_ACCMODE) | O_CLOEXEC);
}

ssize_t fake_cuFileRead(CUfileHandle_t handle, void* base, std::size_t size, off_t file_offset, off_t buffer_offset) {
  int fd = -1, forced_errno = 0, gpu = 0;
  ssize_t forced = 0;
  FakeCuFileRoute route{};
  if (!prepare_io(handle, &fd, &forced, &forced_errno, &route, &gpu, true)) return -CU_FILE_HANDLE_NOT_REGISTERED;
  ssize_t done = 0;
  if (forced != 0) {
    done = forced;
    if (forced == -1) errno = forced_errno;
  } else {
    auto* dst = static_cast<char*>(base) + buffer_offset;
    fd = buffered_twin(fd);
    while (static_cast<std::size_t>(done) < size) {
      ssize_t n = ::pread(fd, dst + done, size - static_cast<std::size_t>(done), file_offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        done = -1;
        break;
      }
      if (n == 0) break;
      done += n;
    }
    ::close(fd);
    bool zero_fill = false;
    {
      State& st = state();
      std::lock_guard<std::mutex> lock(st.mutex);
      zero_fill = st.script.zero_fills_past_end;
    }
    if (zero_fill && done >= 0) {
      const std::uint64_t block_end = (static_cast<std::uint64_t>(file_offset) + size + 4095) / 4096 * 4096;
      const std::uint64_t fill_to = block_end - static_cast<std::uint64_t>(file_offset);
      if (static_cast<std::uint64_t>(done) < fill_to) std::memset(dst + done, 0, fill_to - static_cast<std::uint64_t>(done));
    }
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.counters.reads;
  if (done >= 0) {
    s.counters.bytes_read += static_cast<std::uint64_t>(done);
    count_read(s, route, 1, static_cast<std::uint64_t>(done), gpu);
  } else {
    gpu_stats(s, gpu).n_reads_err += 1;
    s.stats.detailed.basic.read_ops.err += 1;
  }
  return done;
}

ssize_t fake_cuFileWrite(CUfileHandle_t handle, const void* base, std::size_t size, off_t file_offset,
                         off_t buffer_offset) {
  int fd = -1, forced_errno = 0, gpu = 0;
  ssize_t forced = 0;
  FakeCuFileRoute route{};
  if (!prepare_io(handle, &fd, &forced, &forced_errno, &route, &gpu, false)) return -CU_FILE_HANDLE_NOT_REGISTERED;
  ssize_t done = 0;
  if (forced != 0) {
    done = forced;
    if (forced == -1) errno = forced_errno;
  } else {
    const auto* src = static_cast<const char*>(base) + buffer_offset;
    fd = buffered_twin(fd);
    while (static_cast<std::size_t>(done) < size) {
      ssize_t n = ::pwrite(fd, src + done, size - static_cast<std::size_t>(done), file_offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        done = -1;
        break;
      }
      done += n;
    }
    ::close(fd);
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.counters.writes;
  if (done >= 0) {
    s.counters.bytes_written += static_cast<std::uint64_t>(done);
    count_write(s, route, static_cast<std::uint64_t>(done), gpu);
  } else {
    gpu_stats(s, gpu).n_writes_err += 1;
    s.stats.detailed.basic.write_ops.err += 1;
  }
  return done;
}

CUfileError_t fake_cuFileGetParameterBool(CUFileBoolConfigParameter_t param, bool* value) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (param != CUFILE_PARAM_FORCE_COMPAT_MODE || !s.script.force_compat_parameter) {
    return CUfileError_t{CU_FILE_INVALID_VALUE, CUDA_SUCCESS};
  }
  *value = *s.script.force_compat_parameter;
  return CUfileError_t{CU_FILE_SUCCESS, CUDA_SUCCESS};
}

CUfileError_t fake_cuFileGetVersion(int* version) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *version = s.script.version;
  return ok();
}

CUfileError_t fake_cuFileSetStatsLevel(int level) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.script.stats_level_error != 0) return error(s.script.stats_level_error);
  if (level < 0 || level > 3) return error(CU_FILE_INVALID_VALUE);
  s.counters.stats_level = level;
  return ok();
}

CUfileError_t fake_cuFileStatsStart() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.counters.stats_level == 0) return error(CU_FILE_INVALID_VALUE);
  s.counters.stats_started = true;
  return ok();
}

CUfileError_t fake_cuFileStatsReset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::memset(&s.stats, 0, sizeof s.stats);
  return ok();
}

CUfileError_t fake_cuFileGetStatsL1(CUfileStatsLevel1_t* stats) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.counters.stats_started || s.counters.stats_level < 1) return error(CU_FILE_INVALID_VALUE);
  *stats = s.stats.detailed.basic;
  return ok();
}

CUfileError_t fake_cuFileGetStatsL3(CUfileStatsLevel3_t* stats) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.counters.stats_started || s.counters.stats_level < 3) return error(CU_FILE_INVALID_VALUE);
  *stats = s.stats;
  return ok();
}

CuFileApi& table() {
  static CuFileApi* api = new CuFileApi;
  return *api;
}

bool missing(const FakeCuFileScript& script, const char* name) {
  return std::find(script.missing_symbols.begin(), script.missing_symbols.end(), name) != script.missing_symbols.end();
}

bool same_table(const CuFileApi& a, const CuFileApi& b) {
  bool same = a.library == b.library && a.missing_optional == b.missing_optional;
#define FAKE_SAME_ENTRY_(need, symbol, result, parameters) same = same && a.symbol == b.symbol;
  FERRY_CUFILE_SYMBOLS(FAKE_SAME_ENTRY_)
#undef FAKE_SAME_ENTRY_
  return same;
}

}  // namespace

Result<const CuFileApi*> fake_cufile_api() {
  State& s = state();
  FakeCuFileScript script;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    script = s.script;
  }
  if (!script.library_present) {
    return Status(ErrorCode::unavailable,
                  "libcufile.so.0 not found: libcufile.so.0: cannot open shared object file: No such file or directory");
  }
  // Built aside and copied into the shared table only when the script changed it: threads that use the
  // table while others ask for it again (every open does) must not see it rewritten under them.
  CuFileApi api;
  api.library = "fake-cufile";
  api.missing_optional.clear();
  // Every entry point of cufile_symbols.hpp is the fake_ function of its name; optional ones the script
  // leaves out stay null, recorded as load() records what a real library lacks.
#define FAKE_ENTRY_(need, symbol, result, parameters)                              \
  if (SymbolNeed::need == SymbolNeed::optional && missing(script, #symbol)) {      \
    api.symbol = nullptr;                                                          \
    api.missing_optional.push_back(#symbol);                                       \
  } else {                                                                         \
    api.symbol = fake_##symbol;                                                    \
  }
  FERRY_CUFILE_SYMBOLS(FAKE_ENTRY_)
#undef FAKE_ENTRY_
  static std::mutex table_mutex;
  std::lock_guard<std::mutex> lock(table_mutex);
  CuFileApi& shared = table();
  if (!same_table(shared, api)) {
    shared = api;
  }
  return static_cast<const CuFileApi*>(&shared);
}

void reset_fake_cufile() {
  CuFileDriver::close_for_testing(table());
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.script = FakeCuFileScript{};
  s.counters = FakeCuFileCounters{};
  s.handles.clear();
  std::memset(&s.stats, 0, sizeof s.stats);
  s.driver_open = false;
  s.next_handle = 1;
}

FakeCuFileScript& fake_cufile_script() { return state().script; }

FakeCuFileCounters fake_cufile_counters() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.counters;
}

void fake_cufile_add_reads(FakeCuFileRoute route, std::uint64_t ops, std::uint64_t bytes, int gpu) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  count_read(s, route, ops, bytes, gpu);
}

}  // namespace ferry::testing
