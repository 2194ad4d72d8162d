// The block device behind a mount: major:minor -> /sys/dev/block/M:m -> device name, partition ->
// whole disk, and the PCI controller found by resolving the sysfs device path.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "platform/probes/pci_topology.hpp"
#include "ferry/status.hpp"

namespace ferry::detail::probes {

struct BlockDevice {
  unsigned major = 0;
  unsigned minor = 0;
  std::string name;          // kernel name: "nvme0n1p2", "vda", "dm-0"
  std::string disk_name;     // whole disk: "nvme0n1" for "nvme0n1p2"; equal to `name` for a whole disk
  bool is_partition = false;
  std::string sysfs_path;    // resolved live path: "/sys/devices/pci0000:00/0000:00:05.0/virtio2/block/vda"
  PciPath pci;               // controller chain; empty for virtual devices (dm, md, loop, nvme multipath)
  std::string dm_name;       // device-mapper name ("vg0-scratch") from dm/name; empty otherwise
  std::vector<std::string> slaves;  // devices underneath a dm/md device ("nvme0n1p3")
  std::string no_pci_reason; // why `pci` is empty; empty when it is not
  std::vector<std::string> evidence;
  /// The controller's PCI address ("0000:00:05.0"), or empty.
  std::string controller_bdf() const { return pci.leaf(); }
};

/// Resolves `<root>/sys/dev/block/<major>:<minor>` and reads partition/dm/slaves facts.
/// Errors: `not_found` when sysfs has no such block device (e.g. major 0: a virtual file system such
/// as tmpfs, overlay or NFS has no block device — check the file system type first).
Result<BlockDevice> probe_block_device(unsigned major, unsigned minor, const std::filesystem::path& root = "/");

}  // namespace ferry::detail::probes
