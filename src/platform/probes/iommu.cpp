// IOMMU probing from sysfs and the kernel command line.
#include "platform/probes/iommu.hpp"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "platform/probes/probe_fs.hpp"

namespace ferry::detail::probes {

namespace fs = std::filesystem;

bool IommuCmdline::says_off() const {
  return intel_iommu == "off" || amd_iommu == "off" || iommu == "off";
}

bool IommuCmdline::says_passthrough() const {
  // iommu.passthrough is the generic switch; iommu=pt/nopt the x86 one. Either may appear.
  if (iommu_passthrough) {
    const auto& v = *iommu_passthrough;
    if (v == "1" || v == "y" || v == "Y" || v == "on") return true;
    if (v == "0" || v == "n" || v == "N" || v == "off") return false;
  }
  return iommu == "pt";
}

IommuCmdline parse_iommu_cmdline(std::string_view cmdline) {
  IommuCmdline c;
  for (auto tok : split_ws(cmdline)) {
    auto eq = tok.find('=');
    if (eq == std::string_view::npos) continue;
    auto key = tok.substr(0, eq);
    std::string val(tok.substr(eq + 1));
    if (key == "intel_iommu") c.intel_iommu = val;
    else if (key == "amd_iommu") c.amd_iommu = val;
    else if (key == "iommu") c.iommu = val;
    else if (key == "iommu.passthrough") c.iommu_passthrough = val;
    else continue;
    c.tokens.emplace_back(tok);
  }
  // intel_iommu takes comma-separated options ("on,sm_on"); reduce to "on"/"off" when one is there.
  if (c.intel_iommu) {
    std::string_view v = *c.intel_iommu;
    bool on = false, off = false;
    std::size_t i = 0;
    while (i <= v.size()) {
      std::size_t j = std::min(v.find(',', i), v.size());
      auto opt = v.substr(i, j - i);
      on = on || opt == "on";
      off = off || opt == "off";
      i = j + 1;
    }
    if (off) c.intel_iommu = "off";
    else if (on) c.intel_iommu = "on";
  }
  return c;
}

const char* iommu_mode_name(IommuMode m) noexcept {
  switch (m) {
    case IommuMode::off: return "off";
    case IommuMode::passthrough: return "passthrough";
    case IommuMode::translated: return "translated";
  }
  return "unknown";
}

Result<IommuProbe> probe_iommu(const fs::path& root) {
  IommuProbe p;
  std::error_code ec;
  auto cls = under_root(root, "/sys/class/iommu");
  if (fs::is_directory(cls, ec)) {
    for (const auto& e : fs::directory_iterator(cls, ec)) {
      auto n = e.path().filename().string();
      if (!n.empty() && n[0] != '.') p.units.push_back(n);
    }
    std::sort(p.units.begin(), p.units.end());
  }
  p.evidence.push_back(p.units.empty() ? std::string("/sys/class/iommu: no IOMMU units")
                                       : fmt::format("/sys/class/iommu: {}", fmt::join(p.units, ", ")));

  auto groups = under_root(root, "/sys/kernel/iommu_groups");
  if (fs::is_directory(groups, ec)) {
    for (const auto& e : fs::directory_iterator(groups, ec)) {
      auto n = e.path().filename().string();
      if (n.empty() || !std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) continue;
      ++p.group_count;
      if (auto t = read_trimmed(e.path() / "type"); t.ok()) ++p.group_types[*t];
    }
  }
  std::string types;
  for (const auto& [t, n] : p.group_types) types += fmt::format(" {}={}", t, n);
  p.evidence.push_back(fmt::format("/sys/kernel/iommu_groups: {} groups{}{}", p.group_count,
                                   types.empty() ? "" : ", types:", types));

  auto cmd = read_file_bytes(under_root(root, "/proc/cmdline"));
  if (cmd.ok()) {
    p.cmdline = parse_iommu_cmdline(*cmd);
    p.evidence.push_back(p.cmdline.tokens.empty()
                             ? std::string("/proc/cmdline: no IOMMU switches")
                             : fmt::format("/proc/cmdline: {}", fmt::join(p.cmdline.tokens, " ")));
  } else if (cmd.status().code() == ErrorCode::not_found) {
    p.evidence.push_back("/proc/cmdline: absent");
  } else {
    return cmd.status();
  }

  bool present = !p.units.empty() || p.group_count > 0;
  bool identity = p.group_types.count("identity") > 0 && p.group_types.size() == 1;
  if (!present) {
    p.mode = IommuMode::off;
    p.security_note =
        "IOMMU off: devices can DMA to any host memory and are not isolated from each other or from the "
        "host, so a faulty or malicious device (or a VM given one) can read or corrupt memory. Peer-to-peer "
        "DMA needs no address translation, which is the simplest setup for GPUDirect Storage.";
  } else if (identity || (p.group_types.empty() && p.cmdline.says_passthrough())) {
    p.mode = IommuMode::passthrough;
    p.security_note =
        "IOMMU in passthrough: host-owned devices are identity-mapped, so their DMA is not restricted "
        "(devices handed to VMs through VFIO are still isolated). Peer-to-peer DMA works without "
        "translation; kernel DMA protection against host devices is given up.";
  } else {
    p.mode = IommuMode::translated;
    p.security_note =
        "IOMMU translating: each device can only reach memory mapped for it, which protects the host. "
        "Peer-to-peer DMA needs mappings through the IOMMU (and, behind a switch with ACS redirect on, "
        "travels via the root complex); turning translation off or to passthrough would speed this up "
        "but would give up that DMA isolation.";
  }
  return p;
}

}  // namespace ferry::detail::probes
