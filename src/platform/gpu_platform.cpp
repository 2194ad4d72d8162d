// process_gpu_platform: the real, lazily loaded libraries.
#include "platform/gpu_platform.hpp"

#include <atomic>

#include <fmt/format.h>

#include "platform/cuda/cuda_api.hpp"
#include "platform/cufile/cufile_api.hpp"
#include "platform/dynamic_library.hpp"
#include "platform/probes/cufile_config.hpp"
#include "platform/probes/nvidia_fs.hpp"

namespace ferry::detail {
namespace {

DirectRouteHint probe_direct_route_hint() {
  DirectRouteHint hint;
  auto nvfs = probes::probe_nvidia_fs("/");
  auto config = probes::probe_cufile_config("/");
  if (!nvfs.ok() || !config.ok()) return hint;  // cannot tell: let cuFile say
  const bool module = nvfs->module_loaded;
  const bool p2pdma = config->use_pci_p2pdma.value;
  hint.maybe_direct = module || p2pdma;
  hint.evidence = fmt::format("checked without opening cuFile: {}; {} {}",
                              module ? "the nvidia_fs module is loaded" : "/proc/modules lists no nvidia_fs module",
                              config->file_found ? config->path : "no cufile.json (defaults)",
                              p2pdma ? "enables PCI P2PDMA (properties.use_pci_p2pdma)"
                                     : "does not enable PCI P2PDMA (properties.use_pci_p2pdma is false)");
  return hint;
}

}  // namespace

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
      []() -> DirectRouteHint {
        static const DirectRouteHint hint = probe_direct_route_hint();
        return hint;
      },
      []() -> bool {
        // Whether something (Ferry, PyTorch, CuPy) loaded the driver already. Once loaded it stays (Ferry
        // never unloads it), so the answer is kept and requests skip the loader's lock.
        // A "no" holds until the next library load: a CPU-only process asks once, not per request.
        static std::atomic<bool> loaded{false};
        static std::atomic<std::uint64_t> absent_in{0};  // loaded_libraries_version() + 1 when it was not
        if (loaded.load(std::memory_order_relaxed)) return true;
        const std::uint64_t version = loaded_libraries_version();
        if (version != 0 && absent_in.load(std::memory_order_relaxed) == version + 1) return false;
        if (!library_loaded("libcuda.so")) {
          absent_in.store(version + 1, std::memory_order_relaxed);
          return false;
        }
        loaded.store(true, std::memory_order_relaxed);
        return true;
      },
  };
  return platform;
}

}  // namespace ferry::detail
