// `ferry --version`: Ferry's version and the GPU libraries this process would use.
#pragma once

#include <string>

namespace ferry::cli {

/// Three lines: "ferry 0.1.0", then the CUDA driver and cuFile found at run time, each a version or
/// "not found (<the loader's reason>)":
///   ferry 0.1.0
///   CUDA driver: 12.4 (cuDriverGetVersion 12040, libcuda.so.1)
///   cuFile: 1150 (cuFileGetVersion, libcufile.so.0)
/// Cheap: see cli/support/gpu_library_versions.hpp.
std::string version_text(const std::string& ferry_version);

}  // namespace ferry::cli
