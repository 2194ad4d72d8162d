// `ferry --version`: see version_text.hpp.
#include "version_text.hpp"

#include <fmt/format.h>

#include "ferry_tooling/gpu_library_versions.hpp"

namespace ferry::cli {

std::string version_text(const std::string& ferry_version) {
  return fmt::format("ferry {}\n{}\n{}", ferry_version, tooling::cuda_driver_version_line(),
                     tooling::cufile_version_line());
}

}  // namespace ferry::cli
