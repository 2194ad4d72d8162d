// Block device facts from sysfs.
#include "platform/probes/block_device.hpp"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "platform/probes/probe_fs.hpp"

namespace ferry::detail::probes {

namespace fs = std::filesystem;

static std::string last_component(const std::string& p) {
  auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

static std::string parent_of(const std::string& p) {
  auto s = p.find_last_of('/');
  return s == std::string::npos || s == 0 ? std::string("/") : p.substr(0, s);
}

Result<BlockDevice> probe_block_device(unsigned major, unsigned minor, const fs::path& root) {
  BlockDevice d;
  d.major = major;
  d.minor = minor;
  std::string link = fmt::format("/sys/dev/block/{}:{}", major, minor);
  auto resolved = resolve_in_root(root, link);
  if (!resolved.ok()) {
    return Status(ErrorCode::not_found,
                  fmt::format("No block device {}:{} in sysfs ({}){}", major, minor, resolved.status().message(),
                              major == 0 ? "; major 0 is an anonymous device (tmpfs, overlay, NFS, ...)" : ""),
                  ENOENT, link);
  }
  d.sysfs_path = *resolved;
  d.name = last_component(d.sysfs_path);
  d.evidence.push_back(fmt::format("{} -> {}", link, d.sysfs_path));

  std::error_code ec;
  // A partition's directory holds a "partition" file and sits inside its disk's directory.
  if (fs::exists(under_root(root, d.sysfs_path + "/partition"), ec)) {
    d.is_partition = true;
    d.disk_name = last_component(parent_of(d.sysfs_path));
    d.evidence.push_back(fmt::format("{}/partition exists: partition of {}", d.sysfs_path, d.disk_name));
  } else {
    d.disk_name = d.name;
  }

  if (auto dm = read_trimmed(under_root(root, d.sysfs_path + "/dm/name")); dm.ok()) {
    d.dm_name = *dm;
    d.evidence.push_back(fmt::format("{}/dm/name: {}", d.sysfs_path, d.dm_name));
  }
  if (fs::is_directory(under_root(root, d.sysfs_path + "/slaves"), ec)) {
    for (const auto& e : fs::directory_iterator(under_root(root, d.sysfs_path + "/slaves"), ec))
      d.slaves.push_back(e.path().filename().string());
    std::sort(d.slaves.begin(), d.slaves.end());
  }

  d.pci = parse_pci_device_path(d.sysfs_path);
  if (d.pci.has_pci()) {
    d.evidence.push_back(fmt::format("controller {} on host bridge {} (bridge chain: {})", d.pci.leaf(),
                                     d.pci.host_bridge, fmt::join(d.pci.bdf_chain, " > ")));
  } else {
    std::string kind = !d.dm_name.empty() || d.name.rfind("dm-", 0) == 0 ? "device-mapper device"
                       : d.name.rfind("md", 0) == 0                      ? "software RAID (md) device"
                       : d.name.rfind("loop", 0) == 0                    ? "loop device"
                       : d.sysfs_path.find("nvme-subsystem") != std::string::npos
                           ? "NVMe multipath namespace (controllers are listed under its nvme-subsystem)"
                           : "device";
    d.no_pci_reason = fmt::format("{} is a virtual {} with no PCI parent in sysfs{}", d.name, kind,
                                  d.slaves.empty() ? std::string()
                                                   : fmt::format("; it sits on {}", fmt::join(d.slaves, ", ")));
    d.evidence.push_back(d.no_pci_reason);
  }
  return d;
}

}  // namespace ferry::detail::probes
