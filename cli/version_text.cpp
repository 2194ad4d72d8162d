// `ferry --version`: see version_text.hpp.
#include "version_text.hpp"

#include <fmt/format.h>

#include "cli/support/gpu_library_versions.hpp"

namespace ferry::cli {

std::string version_text(const std::string& ferry_version) {
  return fmt::format("ferry {}\n{}\n{}", ferry_version, cuda_driver_version_line(),
                     cufile_version_line());
}

}  // namespace ferry::cli
