// IOMMU state: hardware units registered (/sys/class/iommu/*), IOMMU groups (/sys/kernel/iommu_groups),
// their default domain types, and the kernel command line switches that set them.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail::probes {

/// IOMMU switches found on a kernel command line; absent options are std::nullopt. When an option is
/// repeated, the last one wins (as in the kernel's parser).
struct IommuCmdline {
  std::optional<std::string> intel_iommu;        // "on", "off", "sm_on", ...
  std::optional<std::string> amd_iommu;          // "off", "force_isolation", ...
  std::optional<std::string> iommu;              // "pt", "off", "nopt", "force", ...
  std::optional<std::string> iommu_passthrough;  // iommu.passthrough=0|1
  std::vector<std::string> tokens;               // the raw tokens above, in order
  /// Some switch turns translation off outright (intel_iommu=off, amd_iommu=off, iommu=off).
  bool says_off() const;
  /// Some switch asks for passthrough (iommu=pt, iommu.passthrough=1/y/on) and none later undoes it.
  bool says_passthrough() const;
};

/// Pure: parses /proc/cmdline text.
IommuCmdline parse_iommu_cmdline(std::string_view cmdline);

enum class IommuMode {
  off,          // no IOMMU units and no groups: devices DMA to physical addresses, no isolation
  passthrough,  // IOMMU present, host devices identity-mapped (iommu=pt / "identity" groups)
  translated,   // IOMMU present and translating DMA for host devices
};

/// "off", "passthrough", "translated".
const char* iommu_mode_name(IommuMode m) noexcept;

struct IommuProbe {
  std::vector<std::string> units;          // /sys/class/iommu entries: "dmar0", "ivhd0", ...
  int group_count = 0;                     // numeric directories in /sys/kernel/iommu_groups
  std::map<std::string, int> group_types;  // /sys/kernel/iommu_groups/*/type: {"DMA-FQ": 12, "identity": 3}
  IommuCmdline cmdline;
  IommuMode mode = IommuMode::off;
  /// What the current state means for security and for peer-to-peer DMA, in plain words.
  std::string security_note;
  std::vector<std::string> evidence;
};

/// Reads `<root>/sys/class/iommu`, `<root>/sys/kernel/iommu_groups` and `<root>/proc/cmdline`.
/// Missing directories mean "none" (not an error). Errors: only unreadable /proc/cmdline other than
/// absent (`permission_denied`, `io_error`).
Result<IommuProbe> probe_iommu(const std::filesystem::path& root = "/");

}  // namespace ferry::detail::probes
