// usable_memory_bytes: physical memory, capped by the cgroup limits that apply to this process.
#include "base/memory_limit.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace ferry::detail {
namespace {

// A limit file's number; 0 for "max", a missing file or anything that is not a number.
std::uint64_t limit_in(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return 0;
  try {
    return std::stoull(text);
  } catch (...) {
    return 0;  // past 2^64: no limit anyone set
  }
}

}  // namespace

std::uint64_t usable_memory_bytes(const std::string& root) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  std::uint64_t usable = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                               : 0;
  // The limit files: at the mounts' roots (a container's own cgroup, where it has a cgroup namespace), and at
  // the paths /proc/self/cgroup gives ("0::/path" for v2, "N:memory:/path" for v1).
  std::vector<std::string> files = {root + "/sys/fs/cgroup/memory.max",
                                    root + "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  std::ifstream cgroups(root + "/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (path.empty() || path == "/") continue;
    if (controllers.empty()) files.push_back(root + "/sys/fs/cgroup" + path + "/memory.max");
    std::stringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) {
      if (name == "memory") files.push_back(root + "/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes");
    }
  }
  for (const std::string& file : files) {
    const std::uint64_t limit = limit_in(file);
    if (limit > 0 && (usable == 0 || limit < usable)) usable = limit;
  }
  return usable;
}

}  // namespace ferry::detail
