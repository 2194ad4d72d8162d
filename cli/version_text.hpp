// `ferry --version`: Ferry's version and the GPU libraries this process would use.
#pragma once

#include <string>

namespace ferry::cli {

/// Three lines: "ferry 0.1.0", then the CUDA driver and cuFile found at run time, each a version or
/// "not found (<the loader's reason>)":
///   ferry 0.1.0
///   CUDA driver: 12.4 (cuDriverGetVersion 12040, libcuda.so.1)
///   cuFile: 1150 (cuFileGetVersion, libcufile.so.0)
/// Cheap: libcuda is opened without cuInit, and libcufile is only loaded and asked cuFileGetVersion (where it
/// has it); cuFile's driver is never opened (cuFileDriverOpen costs about 0.6 s and touches nvidia-fs).
std::string version_text(const std::string& ferry_version);

}  // namespace ferry::cli
