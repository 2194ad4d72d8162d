// cli/support/gpu_library_versions.hpp: which CUDA driver and cuFile this process would use, in words.
//
// Part of cli/support (its CMakeLists.txt says who links it); `ferry --version` prints these lines.
// Cheap: libcuda is opened without cuInit, and libcufile is only loaded and asked cuFileGetVersion (where it
// has it); cuFile's driver is never opened (cuFileDriverOpen costs about 0.6 s and touches nvidia-fs).
// Thread safety: may be called from any thread.
#pragma once

#include <string>

namespace ferry::cli {

/// "CUDA driver: 12.4 (cuDriverGetVersion 12040, libcuda.so.1)", or "CUDA driver: not found (<the loader's
/// reason>)", or "CUDA driver: libcuda.so.1 loaded, but cuDriverGetVersion failed: <error>".
std::string cuda_driver_version_line();

/// "cuFile: 1150 (cuFileGetVersion, libcufile.so.0)", or "cuFile: not found (<the loader's reason>)", or
/// "cuFile: libcufile.so.0 loaded, version unknown (...)" for a library without cuFileGetVersion.
std::string cufile_version_line();

}  // namespace ferry::cli
