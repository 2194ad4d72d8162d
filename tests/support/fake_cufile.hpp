// A fake cuFile for CPU-only tests: a CuFileApi table whose behaviour tests script.
//
// Scripted: whether the library "loads" at all, the driver-open error code, the nvidia-fs version (0.0 =
// module not loaded), the P2PDMA flag, the handle-registration error (5027 is what the GPU test machine
// really answers), the lines cuFile "writes to its log" on those failures, which of cuFile's routes the
// statistics count reads and writes under (nvfs, posix, p2p), and a forced cuFileRead/cuFileWrite result.
// Reads and writes really happen: pread/pwrite on the registered descriptor into the buffer, which with
// fake_cuda.hpp is host memory posing as device memory.
//
// Usage: reset_fake_cufile() in SetUp (also closes a CuFileDriver opened on the fake), edit
// fake_cufile_script(), then `auto api = fake_cufile_api();` and pass `*api` (a `const CuFileApi*`).
// Thread safety: entry points may be called from many threads; edit the script only while none run.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "platform/cufile/cufile_api.hpp"

namespace ferry::testing {

enum class FakeCuFileRoute { nvfs, posix, p2p };

struct FakeCuFileScript {
  bool library_present = true;                // false: fake_cufile_api() fails as a missing library does
  std::vector<std::string> missing_symbols;   // optional symbols to leave out ("cuFileGetStatsL3")
  int version = 1150;                         // cuFileGetVersion

  int driver_open_error = 0;                  // CUfileOpError returned by cuFileDriverOpen (0: success)
  int driver_open_cuda_error = 0;             // cu_err alongside, for CU_FILE_CUDA_DRIVER_ERROR
  std::string driver_open_log_line;           // written to cuFile's log when opening fails

  unsigned nvfs_major = 0, nvfs_minor = 0;    // 0.0: nvidia-fs not loaded, as on the GPU test machine
  bool p2pdma = false;                        // sets CU_FILE_P2P_SUPPORTED in fflags
  bool allow_compat_mode = true;
  std::size_t max_direct_io_kib = 16384;

  int handle_register_error = 0;              // e.g. 5027 (CU_FILE_HANDLE_NOT_REGISTERED)
  std::string handle_register_log_line;       // e.g. "udev property not found: ID_FS_USAGE /dev/vda1"

  int stats_level_error = 0;                  // cuFileSetStatsLevel fails with this

  FakeCuFileRoute read_route = FakeCuFileRoute::posix;   // which per-GPU counter a read increments
  FakeCuFileRoute write_route = FakeCuFileRoute::posix;
  int gpu = 0;                                // per-GPU statistics slot I/O is counted in

  // What the real cuFile 1.15 was seen to do at the end of a file (issue 9): a read that meets the end
  // returns the bytes that exist, but writes zeros past them in device memory, through the requested
  // range and on to the end of the last 4 KiB file block it touches.
  bool zero_fills_past_end = false;
  // What cuFileGetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE) answers; nullopt: it fails.
  std::optional<bool> force_compat_parameter;

  ssize_t forced_io_result = 0;               // non-zero: cuFileRead/cuFileWrite return this instead
  int forced_io_errno = 0;                    // errno set when forced_io_result is -1
};

struct FakeCuFileCounters {
  std::uint64_t driver_opens = 0, driver_closes = 0;
  std::uint64_t handle_registers = 0, handle_deregisters = 0, live_handles = 0;
  std::uint64_t reads = 0, writes = 0, bytes_read = 0, bytes_written = 0;
  int stats_level = 0;
  bool stats_started = false;
};

/// The fake table, refreshed from the script (the same object every time, so a CuFileDriver opened on it
/// is found again). Errors: unavailable "libcufile.so.0 not found: ..." when !library_present.
Result<const ferry::detail::CuFileApi*> fake_cufile_api();

/// Closes any CuFileDriver opened on the fake, forgets handles, statistics and counters, and restores the
/// default script.
void reset_fake_cufile();

FakeCuFileScript& fake_cufile_script();
FakeCuFileCounters fake_cufile_counters();

/// Adds to the fake's per-GPU statistics as if cuFile had done I/O elsewhere in the process.
void fake_cufile_add_reads(FakeCuFileRoute route, std::uint64_t ops, std::uint64_t bytes, int gpu = 0);

}  // namespace ferry::testing
