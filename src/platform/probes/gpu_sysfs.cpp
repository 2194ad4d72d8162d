// NVIDIA GPUs from sysfs.
#include "platform/probes/gpu_sysfs.hpp"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "platform/probes/probe_fs.hpp"

namespace ferry::detail::probes {

namespace fs = std::filesystem;

Result<PciResource> parse_pci_resource_line(std::string_view text, int index) {
  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    auto line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line_no++ != index) continue;
    auto f = split_ws(line);
    PciResource r;
    if (f.size() < 3 || !parse_u64(f[0], r.start) || !parse_u64(f[1], r.end) || !parse_u64(f[2], r.flags) ||
        (r.end < r.start)) {
      return Status(ErrorCode::invalid_argument, fmt::format("Malformed resource line {}: \"{}\"", index, line));
    }
    return r;
  }
  return Status(ErrorCode::invalid_argument, fmt::format("No resource line {} ({} lines)", index, line_no));
}

bool is_nvidia_gpu(std::uint16_t vendor_id, std::uint32_t class_code) {
  std::uint32_t cls = class_code >> 8;  // drop the programming interface byte
  return vendor_id == kPciVendorNvidia && (cls == 0x0300 || cls == 0x0302);
}

Result<GpuSysfsProbe> probe_gpus_sysfs(const fs::path& root) {
  GpuSysfsProbe p;
  std::error_code ec;
  auto dir = under_root(root, "/sys/bus/pci/devices");
  if (!fs::is_directory(dir, ec)) {
    p.evidence.push_back("/sys/bus/pci/devices: absent (no PCI bus visible)");
    return p;
  }
  std::vector<std::string> bdfs;
  for (const auto& e : fs::directory_iterator(dir, ec)) bdfs.push_back(e.path().filename().string());
  std::sort(bdfs.begin(), bdfs.end());
  for (const auto& bdf : bdfs) {
    std::string base = "/sys/bus/pci/devices/" + bdf;
    std::uint64_t vendor = 0, cls = 0, device = 0;
    auto v = read_trimmed(under_root(root, base + "/vendor"));
    auto c = read_trimmed(under_root(root, base + "/class"));
    if (!v.ok() || !c.ok() || !parse_u64(*v, vendor) || !parse_u64(*c, cls)) continue;
    if (!is_nvidia_gpu(static_cast<std::uint16_t>(vendor), static_cast<std::uint32_t>(cls))) continue;
    GpuPciDevice g;
    g.bdf = bdf;
    g.vendor_id = static_cast<std::uint16_t>(vendor);
    g.class_code = static_cast<std::uint32_t>(cls);
    if (auto d = read_trimmed(under_root(root, base + "/device")); d.ok() && parse_u64(*d, device))
      g.device_id = static_cast<std::uint16_t>(device);
    g.evidence.push_back(fmt::format("{}: vendor {:#06x} device {:#06x} class {:#08x}", base, g.vendor_id,
                                     g.device_id, g.class_code));
    if (auto n = read_trimmed(under_root(root, base + "/numa_node")); n.ok()) {
      std::uint64_t u = 0;
      g.numa_node = parse_u64(*n, u) ? static_cast<int>(u) : -1;  // "-1" fails parse_u64: stays -1
      g.evidence.push_back(fmt::format("{}/numa_node: {}", base, *n));
    }
    auto res = read_file_bytes(under_root(root, base + "/resource"));
    if (res.ok()) {
      auto bar1 = parse_pci_resource_line(*res, 1);
      if (bar1.ok()) {
        g.bar1_size_bytes = bar1->size_bytes();
        g.evidence.push_back(fmt::format("{}/resource line 1 (BAR1): {:#x}-{:#x} = {} MiB", base, bar1->start,
                                         bar1->end, g.bar1_size_bytes >> 20));
      } else {
        g.evidence.push_back(fmt::format("{}/resource: {}", base, bar1.status().message()));
      }
    } else {
      g.evidence.push_back(fmt::format("{}/resource: unreadable", base));
    }
    p.gpus.push_back(std::move(g));
  }
  p.evidence.push_back(fmt::format("/sys/bus/pci/devices: {} NVIDIA GPU(s) among {} functions", p.gpus.size(),
                                   bdfs.size()));
  return p;
}

}  // namespace ferry::detail::probes
