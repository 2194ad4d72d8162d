// process_gpu_platform: the real, lazily loaded libraries.
#include "route/gpu_platform.hpp"

#include "platform/cuda/cuda_api.hpp"
#include "platform/cufile/cufile_api.hpp"

namespace ferry::detail {

const GpuPlatform& process_gpu_platform() {
  static const GpuPlatform platform{
      [](Status* why) -> const CudaApi* {
        const CudaApi* api = process_cuda_api();
        if (api == nullptr && why) *why = process_cuda_status();
        return api;
      },
      [](Status* why) -> const CuFileApi* {
        const CuFileApi* api = process_cufile_api();
        if (api == nullptr && why) *why = process_cufile_status();
        return api;
      },
  };
  return platform;
}

}  // namespace ferry::detail
