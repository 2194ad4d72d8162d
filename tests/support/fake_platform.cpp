// fake_gpu_platform: both fakes behind the GpuPlatform seam.
#include "support/fake_platform.hpp"

#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"

namespace ferry::testing {

const detail::GpuPlatform& fake_gpu_platform() {
  static const detail::GpuPlatform platform{
      [](Status*) -> const detail::CudaApi* { return &fake_cuda_api(); },
      [](Status* why) -> const detail::CuFileApi* {
        auto api = fake_cufile_api();
        if (!api.ok()) {
          *why = api.status();
          return nullptr;
        }
        return *api;
      },
  };
  return platform;
}

}  // namespace ferry::testing
