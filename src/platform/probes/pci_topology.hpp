// Where a PCI function sits: its chain of bridges up to the host bridge (from the resolved sysfs device
// path), its NUMA node, and how two functions relate (same PCIe switch, same root complex, same NUMA
// node, across sockets) — the facts that decide whether storage-to-GPU peer-to-peer DMA is short.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail::probes {

/// The PCI part of a resolved sysfs device path such as
/// "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/nvme/nvme0/nvme0n1".
struct PciPath {
  std::string host_bridge;              // "pci0000:00" (root complex / host bridge); empty when none
  std::vector<std::string> bdf_chain;   // top (on the root bus) to bottom: ["0000:00:01.0", ..., "0000:03:00.0"]
  bool has_pci() const { return !bdf_chain.empty(); }
  /// The lowest PCI function in the path (the controller of a block device); empty when none.
  std::string leaf() const { return bdf_chain.empty() ? std::string() : bdf_chain.back(); }
};

/// Pure: extracts the host bridge and the BDF chain from a sysfs device path. Paths under
/// /sys/devices/virtual (device-mapper, loop, nvme-subsystem) give an empty chain.
PciPath parse_pci_device_path(std::string_view sysfs_device_path);

struct PciLocation {
  std::string bdf;          // "0000:00:06.0"
  std::string sysfs_path;   // resolved: "/sys/devices/pci0000:00/0000:00:06.0"
  PciPath path;
  int numa_node = -1;       // -1: the kernel reports no affinity (single node, or firmware gave none)
  std::vector<std::string> evidence;
};

/// Resolves `<root>/sys/bus/pci/devices/<bdf>` and reads its numa_node.
/// Errors: `not_found` when no such device; a missing or unreadable numa_node gives -1 with evidence.
Result<PciLocation> probe_pci_location(std::string_view bdf, const std::filesystem::path& root = "/");

/// The closest relationship that holds, best first.
enum class PciRelation {
  same_device,       // the same function (or one is a bridge above the other)
  same_pcie_switch,  // share a bridge below the root port: P2P can stay inside the switch
  same_root_complex, // same host bridge (pciDDDD:BB): P2P goes through the root complex
  same_numa_node,    // different host bridges on one NUMA node (one socket)
  across_sockets,    // different NUMA nodes: P2P crosses the inter-socket link, often slow or unsupported
  unknown,           // different host bridges and NUMA affinity unknown (-1)
};

/// "same_device", "same_pcie_switch", ...
const char* pci_relation_name(PciRelation r) noexcept;

struct PciRelationship {
  PciRelation relation = PciRelation::unknown;
  std::string common_bridge;  // lowest shared BDF when they share one; else empty
  std::string detail;         // one sentence for the report
};

/// Pure: relates two located functions.
PciRelationship relate_pci(const PciLocation& a, const PciLocation& b);

}  // namespace ferry::detail::probes
