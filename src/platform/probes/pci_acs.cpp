// ACS capability parsing. Extended capability header (32 bits, little-endian): ID in bits 15:0,
// version in 19:16, next offset in 31:20. ACS capability register at +4 (16 bits), control at +6.
#include "platform/probes/pci_acs.hpp"

#include <fmt/format.h>

#include "platform/probes/pci_topology.hpp"
#include "platform/probes/probe_fs.hpp"

namespace ferry::detail::probes {

std::string AcsFlags::to_string() const {
  static constexpr const char* kNames[] = {"SV", "TB", "RR", "CR", "UF", "EC", "DT"};
  std::string s;
  for (int i = 0; i < 7; ++i) {
    if (raw & (1u << i)) {
      if (!s.empty()) s += ' ';
      s += kNames[i];
    }
  }
  return s.empty() ? "none" : s;
}

static std::uint32_t le32(std::span<const std::uint8_t> b, std::size_t off) {
  return std::uint32_t(b[off]) | std::uint32_t(b[off + 1]) << 8 | std::uint32_t(b[off + 2]) << 16 |
         std::uint32_t(b[off + 3]) << 24;
}

AcsCapability parse_acs_capability(std::span<const std::uint8_t> config) {
  AcsCapability acs;
  if (config.size() <= 64) {
    acs.state = AcsState::unreadable;
    return acs;
  }
  if (config.size() <= kPciExtCapStart) {
    acs.state = AcsState::no_extended_space;
    return acs;
  }
  acs.state = AcsState::absent;
  std::size_t off = kPciExtCapStart;
  // Each capability takes at least 4 bytes, so a well-formed list has at most (4096-256)/4 entries.
  for (int guard = 0; guard < 960; ++guard) {
    if (off < kPciExtCapStart || off + 8 > config.size()) break;
    std::uint32_t hdr = le32(config, off);
    if (hdr == 0 || hdr == 0xffffffffu) break;  // empty list, or a device that is gone
    if ((hdr & 0xffff) == kPciExtCapIdAcs) {
      acs.state = AcsState::present;
      acs.offset = static_cast<std::uint16_t>(off);
      acs.capability.raw = static_cast<std::uint16_t>(config[off + 4] | config[off + 5] << 8);
      acs.control.raw = static_cast<std::uint16_t>(config[off + 6] | config[off + 7] << 8);
      return acs;
    }
    std::size_t next = (hdr >> 20) & 0xffc;
    if (next == 0 || next <= off) break;  // end of list; a backward pointer would loop
    off = next;
  }
  return acs;
}

BridgeAcs probe_acs(std::string_view bdf, const std::filesystem::path& root) {
  BridgeAcs b;
  b.bdf = std::string(bdf);
  std::string live = fmt::format("/sys/bus/pci/devices/{}/config", bdf);
  auto bytes = read_file_bytes(under_root(root, live), 4096);
  if (!bytes.ok()) {
    b.acs.state = AcsState::unreadable;
    b.evidence = fmt::format("{}: unreadable ({})", live, bytes.status().message());
    return b;
  }
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes->data());
  b.acs = parse_acs_capability(std::span<const std::uint8_t>(data, bytes->size()));
  switch (b.acs.state) {
    case AcsState::present:
      b.evidence = fmt::format("{}: ACS at {:#x}, capability {}, control {}", live, b.acs.offset,
                               b.acs.capability.to_string(), b.acs.control.to_string());
      break;
    case AcsState::absent:
      b.evidence = fmt::format("{}: no ACS capability in extended config space", live);
      break;
    case AcsState::no_extended_space:
      b.evidence = fmt::format("{}: {} bytes, no PCIe extended config space", live, bytes->size());
      break;
    case AcsState::unreadable:
      b.evidence = fmt::format("{}: only {} bytes readable; reading ACS needs root", live, bytes->size());
      break;
  }
  return b;
}

Result<AcsPathProbe> probe_acs_path(std::string_view device_bdf, std::string_view gpu_bdf,
                                    const std::filesystem::path& root) {
  AcsPathProbe p;
  p.device_bdf = std::string(device_bdf);
  p.gpu_bdf = std::string(gpu_bdf);
  FERRY_ASSIGN_OR_RETURN(PciLocation dev, probe_pci_location(device_bdf, root));
  FERRY_ASSIGN_OR_RETURN(PciLocation gpu, probe_pci_location(gpu_bdf, root));
  const auto& a = dev.path.bdf_chain;
  const auto& b = gpu.path.bdf_chain;
  std::size_t common = 0;
  if (dev.path.host_bridge == gpu.path.host_bridge)
    while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
  // Bridges only: the endpoints themselves are the chains' last elements.
  std::vector<std::string> bridges;
  std::size_t start = common > 0 ? common - 1 : 0;  // include the lowest shared bridge
  for (std::size_t i = a.empty() ? 0 : a.size() - 1; i-- > start;) bridges.push_back(a[i]);
  for (std::size_t i = common; i + 1 < b.size(); ++i) bridges.push_back(b[i]);
  if (common > 0 && (common >= a.size() || common >= b.size())) bridges.clear();  // one is above the other
  for (const auto& bdf : bridges) {
    BridgeAcs ba = probe_acs(bdf, root);
    p.any_redirect = p.any_redirect || ba.acs.redirects_p2p();
    p.any_unreadable = p.any_unreadable || ba.acs.state == AcsState::unreadable;
    p.evidence.push_back(ba.evidence);
    p.bridges.push_back(std::move(ba));
  }
  if (p.bridges.empty()) {
    p.security_note = fmt::format("No PCI bridge between {} and {}: ACS does not apply.", device_bdf, gpu_bdf);
  } else if (p.any_redirect) {
    p.security_note =
        "ACS redirect is on at a bridge on the path: peer-to-peer traffic is sent up to the root complex, "
        "where the IOMMU can check it. This keeps devices isolated (and in separate IOMMU groups) at the "
        "cost of P2P bandwidth and latency. Disabling ACS there would let the devices talk directly, but "
        "they could then reach each other unchecked and could no longer be isolated from each other.";
  } else {
    p.security_note =
        "No ACS redirect on the path: peer-to-peer traffic can go straight across the bridges. Devices "
        "below such a bridge are not isolated from each other by the IOMMU.";
  }
  if (p.any_unreadable) p.security_note += " Some config spaces could not be read far enough; run as root.";
  return p;
}

}  // namespace ferry::detail::probes
