// PCI topology from sysfs device paths.
#include "platform/probes/pci_topology.hpp"

#include <fmt/format.h>

#include "platform/probes/probe_fs.hpp"

namespace ferry::detail::probes {

static bool is_host_bridge_name(std::string_view n) {
  // "pci" + "dddd:bb"
  return n.size() == 10 && n.substr(0, 3) == "pci" && n[7] == ':';
}

PciPath parse_pci_device_path(std::string_view p) {
  PciPath out;
  std::size_t i = 0;
  while (i < p.size()) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view c = p.substr(i, j - i);
    i = j + 1;
    if (c == "virtual" && out.host_bridge.empty()) return PciPath{};  // /sys/devices/virtual/...
    if (out.host_bridge.empty() && is_host_bridge_name(c)) {
      out.host_bridge = std::string(c);
    } else if (!out.host_bridge.empty() && is_pci_bdf(c)) {
      out.bdf_chain.emplace_back(c);
    }
  }
  return out;
}

Result<PciLocation> probe_pci_location(std::string_view bdf, const std::filesystem::path& root) {
  PciLocation loc;
  loc.bdf = std::string(bdf);
  std::string link = fmt::format("/sys/bus/pci/devices/{}", bdf);
  auto resolved = resolve_in_root(root, link);
  if (!resolved.ok()) {
    return Status(ErrorCode::not_found, fmt::format("No PCI device {}: {}", bdf, resolved.status().message()),
                  ENOENT, link);
  }
  loc.sysfs_path = *resolved;
  loc.path = parse_pci_device_path(loc.sysfs_path);
  loc.evidence.push_back(fmt::format("{} -> {}", link, loc.sysfs_path));
  auto numa = read_trimmed(under_root(root, loc.sysfs_path + "/numa_node"));
  if (numa.ok()) {
    try {
      loc.numa_node = std::stoi(*numa);
    } catch (...) {
      loc.numa_node = -1;
    }
    loc.evidence.push_back(fmt::format("{}/numa_node: {}", loc.sysfs_path, *numa));
  } else {
    loc.evidence.push_back(fmt::format("{}/numa_node: unreadable ({})", loc.sysfs_path, error_code_name(numa.status().code())));
  }
  return loc;
}

const char* pci_relation_name(PciRelation r) noexcept {
  switch (r) {
    case PciRelation::same_device: return "same_device";
    case PciRelation::same_pcie_switch: return "same_pcie_switch";
    case PciRelation::same_root_complex: return "same_root_complex";
    case PciRelation::same_numa_node: return "same_numa_node";
    case PciRelation::across_sockets: return "across_sockets";
    case PciRelation::unknown: return "unknown";
  }
  return "unknown";
}

PciRelationship relate_pci(const PciLocation& a, const PciLocation& b) {
  PciRelationship r;
  const auto& ca = a.path.bdf_chain;
  const auto& cb = b.path.bdf_chain;
  if (!a.path.host_bridge.empty() && a.path.host_bridge == b.path.host_bridge) {
    std::size_t common = 0;
    while (common < ca.size() && common < cb.size() && ca[common] == cb[common]) ++common;
    if (common > 0) r.common_bridge = ca[common - 1];
    if (common > 0 && (common == ca.size() || common == cb.size())) {
      r.relation = PciRelation::same_device;
      r.detail = fmt::format("{} and {} are the same function or one lies below the other", a.bdf, b.bdf);
    } else if (common >= 2) {
      // The first chain element is the root port; a shared element below it is a switch port.
      r.relation = PciRelation::same_pcie_switch;
      r.detail = fmt::format("{} and {} share bridge {} below root port {}: peer-to-peer traffic can stay in "
                             "the switch",
                             a.bdf, b.bdf, r.common_bridge, ca[0]);
    } else {
      r.relation = PciRelation::same_root_complex;
      r.detail = common == 1
                     ? fmt::format("{} and {} share only root port {} on host bridge {}", a.bdf, b.bdf,
                                   r.common_bridge, a.path.host_bridge)
                     : fmt::format("{} and {} are on the same host bridge {} but share no bridge: "
                                   "peer-to-peer traffic goes through the root complex",
                                   a.bdf, b.bdf, a.path.host_bridge);
    }
    return r;
  }
  std::string where = fmt::format("{} on {} (NUMA {}), {} on {} (NUMA {})", a.bdf,
                                  a.path.host_bridge.empty() ? "no host bridge" : a.path.host_bridge,
                                  a.numa_node, b.bdf,
                                  b.path.host_bridge.empty() ? "no host bridge" : b.path.host_bridge,
                                  b.numa_node);
  if (a.numa_node >= 0 && b.numa_node >= 0) {
    r.relation = a.numa_node == b.numa_node ? PciRelation::same_numa_node : PciRelation::across_sockets;
    r.detail = a.numa_node == b.numa_node
                   ? "different host bridges on one NUMA node: " + where
                   : "different NUMA nodes (across sockets): " + where;
  } else {
    r.relation = PciRelation::unknown;
    r.detail = "different host bridges and NUMA affinity unknown: " + where;
  }
  return r;
}

}  // namespace ferry::detail::probes
