// nvidia-fs presence from procfs and /dev.
#include "platform/probes/nvidia_fs.hpp"

#include <algorithm>
#include <cctype>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/ascii.hpp"
#include "platform/probes/probe_fs.hpp"

namespace ferry::detail::probes {

namespace fs = std::filesystem;

static std::string underscored(std::string_view s) {
  std::string o(s);
  std::replace(o.begin(), o.end(), '-', '_');
  return o;
}

std::optional<KernelModule> find_kernel_module(std::string_view text, std::string_view name) {
  std::string want = underscored(name);
  for (std::string_view line : split_lines(text)) {
    auto f = split_ws(line);
    if (f.empty() || underscored(f[0]) != want) continue;
    KernelModule m;
    m.name = std::string(f[0]);
    std::uint64_t v = 0;
    if (f.size() > 1 && parse_u64(f[1], v)) m.size_bytes = v;
    if (f.size() > 2 && parse_u64(f[2], v)) m.use_count = static_cast<int>(v);
    if (f.size() > 4) m.state = std::string(f[4]);
    return m;
  }
  return std::nullopt;
}

std::optional<std::string> parse_nvidia_fs_version(std::string_view text) {
  // Take the first run of digits and dots that starts with a digit, preferring a line naming "version".
  auto scan = [](std::string_view s) -> std::optional<std::string> {
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(s[i]))) continue;
      std::size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
      std::string v(s.substr(i, j - i));
      while (!v.empty() && v.back() == '.') v.pop_back();
      return v;
    }
    return std::nullopt;
  };
  for (std::string_view line : split_lines(text)) {
    if (line.find("version") != std::string_view::npos) {
      auto colon = line.find(':');
      if (auto v = scan(colon == std::string_view::npos ? line : line.substr(colon + 1))) return v;
    }
  }
  return scan(text);
}

Result<NvidiaFsProbe> probe_nvidia_fs(const fs::path& root) {
  NvidiaFsProbe p;
  auto mods = read_file_bytes(under_root(root, "/proc/modules"));
  if (mods.ok()) {
    p.module = find_kernel_module(*mods, "nvidia_fs");
    p.module_loaded = p.module.has_value();
    p.evidence.push_back(p.module ? fmt::format("/proc/modules: nvidia_fs loaded ({} bytes, used by {}, {})",
                                                p.module->size_bytes, p.module->use_count, p.module->state)
                                  : std::string("/proc/modules: no nvidia_fs"));
  } else if (mods.status().code() == ErrorCode::not_found) {
    p.evidence.push_back("/proc/modules: absent (procfs not mounted, or a kernel without modules)");
  } else {
    return mods.status();
  }

  std::error_code ec;
  p.proc_entry_present = fs::is_directory(under_root(root, "/proc/driver/nvidia-fs"), ec);
  auto ver = read_file_bytes(under_root(root, "/proc/driver/nvidia-fs/version"));
  if (ver.ok()) {
    p.version = parse_nvidia_fs_version(*ver);
    p.evidence.push_back(fmt::format("/proc/driver/nvidia-fs/version: {}", trim_ascii(*ver)));
  } else if (ver.status().code() == ErrorCode::not_found) {
    p.evidence.push_back("/proc/driver/nvidia-fs/version: absent");
  } else {
    return ver.status();
  }

  std::vector<std::pair<long, std::string>> nodes;
  for (const auto& e : fs::directory_iterator(under_root(root, "/dev"), ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind("nvidia-fs", 0) != 0) continue;
    std::string num = n.substr(9);
    long idx = (!num.empty() && std::all_of(num.begin(), num.end(), ::isdigit)) ? std::stol(num) : -1;
    nodes.emplace_back(idx, "/dev/" + n);
  }
  std::sort(nodes.begin(), nodes.end());
  for (auto& [i, n] : nodes) p.device_nodes.push_back(n);
  p.evidence.push_back(p.device_nodes.empty() ? std::string("/dev: no nvidia-fs* device nodes")
                                              : fmt::format("/dev: {}", fmt::join(p.device_nodes, " ")));
  if (p.loaded_but_nodes_missing())
    p.evidence.push_back(
        "nvidia_fs is loaded but its device nodes are not visible here (a container needs "
        "--device /dev/nvidia-fs0 ... or equivalent)");
  return p;
}

}  // namespace ferry::detail::probes
