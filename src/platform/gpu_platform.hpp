// Where the router gets CUDA and cuFile from: the process's real libraries, or a test's fakes.
// Both are loaded on first use only, so host-only programs never load cuFile.
#pragma once

#include <string>

#include "ferry/status.hpp"

namespace ferry::detail {

struct CudaApi;
struct CuFileApi;

/// What the platform shows about cuFile's direct routes before cuFile is loaded: whether the nvidia-fs
/// module is loaded and whether cuFile's configuration enables PCI P2PDMA. Opening cuFile's driver
/// costs 0.4-0.85 s on the GPU machine; where neither direct route can exist, `auto` need not pay it.
struct DirectRouteHint {
  bool maybe_direct = true;  // false: cuFile could only use its POSIX path here
  std::string evidence;      // what was checked and what it showed, for the route's reason
};

struct GpuPlatform {
  /// The CUDA driver table, or nullptr with *why set.
  const CudaApi* (*cuda)(Status* why) = nullptr;
  /// The cuFile table, or nullptr with *why set.
  const CuFileApi* (*cufile)(Status* why) = nullptr;
  /// The platform checks above (cheap: a few files read). nullptr: none, so cuFile is always opened.
  DirectRouteHint (*direct_route_hint)() = nullptr;
  /// false when no CUDA driver is loaded in this process yet: then no buffer can be GPU or pinned memory,
  /// and asking the driver would start it (0.1 s in a fresh process) for a read into host memory.
  /// nullptr: always ask.
  bool (*cuda_loaded)() = nullptr;
};

/// The real libraries (process_cuda_api, process_cufile_api), and the real /proc/modules and cufile.json
/// for the hint (read once per process).
const GpuPlatform& process_gpu_platform();

}  // namespace ferry::detail
