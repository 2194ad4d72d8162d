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
      // As the real platform's checks would find a machine that matches the fake cuFile's script.
      []() -> detail::DirectRouteHint {
        const FakeCuFileScript& s = fake_cufile_script();
        const bool module = s.nvfs_major != 0 || s.nvfs_minor != 0;
        return {module || s.p2pdma, std::string("checked without opening cuFile (fake): nvidia_fs ") +
                                        (module ? "loaded" : "not loaded") + ", P2PDMA " + (s.p2pdma ? "on" : "off")};
      },
  };
  return platform;
}

const detail::GpuPlatform& fake_gpu_platform_without_batched_copies() {
  static const detail::CudaApi api = [] {
    detail::CudaApi a = fake_cuda_api();
    a.cuMemcpyBatchAsync_v2 = nullptr;
    return a;
  }();
  static const detail::GpuPlatform platform{[](Status*) -> const detail::CudaApi* { return &api; },
                                            fake_gpu_platform().cufile, fake_gpu_platform().direct_route_hint,
                                            nullptr};
  return platform;
}

}  // namespace ferry::testing
