// NVIDIA GPUs as sysfs sees them (no driver or CUDA needed): PCI address, NUMA node and BAR1 size.
// GPUDirect Storage DMAs into GPU memory through BAR1, so a small BAR1 limits what can be mapped.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail::probes {

inline constexpr std::uint16_t kPciVendorNvidia = 0x10de;

/// One line of a sysfs `resource` file: "start end flags" (hex). An unused BAR is all zeros.
struct PciResource {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t flags = 0;
  std::uint64_t size_bytes() const { return end == 0 && start == 0 ? 0 : end - start + 1; }
};

/// Pure: line `index` (0-based BAR number) of a `resource` file. Errors: `invalid_argument` when the
/// line is missing or malformed.
Result<PciResource> parse_pci_resource_line(std::string_view resource_text, int index);

struct GpuPciDevice {
  std::string bdf;
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint32_t class_code = 0;     // 24 bits: 0x030200 = 3D controller
  int numa_node = -1;               // -1: no affinity reported
  std::uint64_t bar1_size_bytes = 0;  // 0 when unknown or unused
  std::vector<std::string> evidence;
};

struct GpuSysfsProbe {
  std::vector<GpuPciDevice> gpus;  // sorted by BDF
  std::vector<std::string> evidence;
};

/// Pure: whether vendor/class describe an NVIDIA display (0x0300) or 3D (0x0302) controller.
bool is_nvidia_gpu(std::uint16_t vendor_id, std::uint32_t class_code);

/// Lists `<root>/sys/bus/pci/devices/*`, keeps NVIDIA GPUs, reads numa_node and resource.
/// No PCI bus in sysfs means no GPUs (not an error).
Result<GpuSysfsProbe> probe_gpus_sysfs(const std::filesystem::path& root = "/");

}  // namespace ferry::detail::probes
