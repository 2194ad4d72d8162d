// The CUDA driver's and cuFile's versions in words: see cli/support/gpu_library_versions.hpp.
#include "cli/support/gpu_library_versions.hpp"

#include <fmt/format.h>

#include "platform/cuda/cuda_api.hpp"
#include "platform/cufile/cufile_api.hpp"

namespace ferry::cli {

std::string cuda_driver_version_line() {
  // CudaApi::load opens libcuda and resolves its symbols without cuInit; cuDriverGetVersion needs no cuInit.
  auto api = detail::CudaApi::load();
  if (!api.ok()) return fmt::format("CUDA driver: not found ({})", api.status().message());
  int version = 0;
  detail::CUresult rc = api->cuDriverGetVersion(&version);
  if (rc != detail::CUDA_SUCCESS || version <= 0) {
    return fmt::format("CUDA driver: {} loaded, but cuDriverGetVersion failed: {}", api->library,
                       detail::cuda_error_text(*api, rc));
  }
  return fmt::format("CUDA driver: {}.{} (cuDriverGetVersion {}, {})", version / 1000, (version % 1000) / 10, version,
                     api->library);
}

std::string cufile_version_line() {
  // The process's table: loading it points cuFile's log at Ferry's file first, as every other use does.
  const detail::CuFileApi* api = detail::process_cufile_api();
  if (api == nullptr) return fmt::format("cuFile: not found ({})", detail::process_cufile_status().message());
  if (api->cuFileGetVersion == nullptr) {
    return fmt::format("cuFile: {} loaded, version unknown (it has no cuFileGetVersion)", api->library);
  }
  int version = 0;
  detail::CUfileError_t e = api->cuFileGetVersion(&version);
  if (e.err != detail::CU_FILE_SUCCESS) {
    return fmt::format("cuFile: {} loaded, but cuFileGetVersion failed with {}", api->library,
                       static_cast<int>(e.err));
  }
  return fmt::format("cuFile: {} (cuFileGetVersion, {})", version, api->library);
}

}  // namespace ferry::cli
