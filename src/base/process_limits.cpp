// usable_memory_bytes and usable_cores: the machine's memory and cores, capped by the cgroup limits and the
// affinity mask that apply to this process.
#include "base/process_limits.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/host_memory.hpp"

namespace ferry::detail {
namespace {

// The whole numbers at the start of a file, in order, up to the first word that is not one ("max", "-1",
// anything past 2^64): a missing file or a limit of "max" gives none.
std::vector<std::uint64_t> numbers_in(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::uint64_t> numbers;
  for (std::string word; in >> word && word.find_first_not_of("0123456789") == std::string::npos;) {
    try {
      numbers.push_back(std::stoull(word));
    } catch (...) {
      break;
    }
  }
  return numbers;
}

// The folders of this process's cgroups where a controller's files are: the mounts' roots (a container's own
// cgroup, where it has a cgroup namespace), and the paths /proc/self/cgroup gives ("0::/path" for v2,
// "N:cpu,cpuacct:/path" for v1, whose folders are under the controller's mount).
struct CgroupFolders {
  std::vector<std::string> v2, v1;
};

CgroupFolders cgroup_folders(const std::string& root, const std::string& v1_controller) {
  const std::string mount = root + "/sys/fs/cgroup";
  CgroupFolders folders{{mount}, {mount + "/" + v1_controller}};
  std::ifstream cgroups(root + "/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (path.empty() || path == "/") continue;
    if (controllers.empty()) folders.v2.push_back(mount + path);
    std::stringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) {
      if (name == v1_controller) folders.v1.push_back(mount + "/" + v1_controller + path);
    }
  }
  return folders;
}

// The cores a quota of `quota` µs of CPU time every `period` µs gives (a fraction is a core); 0: no quota.
unsigned quota_cores(std::uint64_t quota, std::uint64_t period) {
  if (period == 0) return 0;
  return static_cast<unsigned>(std::clamp<std::uint64_t>((quota + period - 1) / period, 1, 1u << 20));
}

}  // namespace

std::uint64_t usable_memory_bytes(const std::string& root) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  std::uint64_t usable = pages > 0 ? static_cast<std::uint64_t>(pages) * system_page_bytes() : 0;
  const CgroupFolders folders = cgroup_folders(root, "memory");
  std::vector<std::string> files;
  for (const std::string& folder : folders.v2) files.push_back(folder + "/memory.max");
  for (const std::string& folder : folders.v1) files.push_back(folder + "/memory.limit_in_bytes");
  for (const std::string& file : files) {
    const std::vector<std::uint64_t> limit = numbers_in(file);
    if (!limit.empty() && limit[0] > 0 && (usable == 0 || limit[0] < usable)) usable = limit[0];
  }
  return usable;
}

unsigned usable_cores(const std::string& root) {
  cpu_set_t set;
  CPU_ZERO(&set);
  unsigned cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? static_cast<unsigned>(CPU_COUNT(&set)) : 0;
  if (cores == 0) cores = static_cast<unsigned>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  auto cap = [&cores](unsigned quota) {
    if (quota > 0) cores = std::min(cores, quota);
  };
  const CgroupFolders folders = cgroup_folders(root, "cpu");
  for (const std::string& folder : folders.v2) {
    const std::vector<std::uint64_t> max = numbers_in(folder + "/cpu.max");  // "QUOTA PERIOD", or "max PERIOD"
    if (max.size() == 2) cap(quota_cores(max[0], max[1]));
  }
  for (const std::string& folder : folders.v1) {  // a quota of -1: none
    const auto quota = numbers_in(folder + "/cpu.cfs_quota_us"), period = numbers_in(folder + "/cpu.cfs_period_us");
    if (!quota.empty() && !period.empty()) cap(quota_cores(quota[0], period[0]));
  }
  return cores;
}

unsigned usable_cores() {
  // An atomic, not a function's static: a static's first use holds a guard while it reads the cgroup files, and
  // a fork() then (a thread of the parent inside it) left the child waiting on that guard for good
  // (Fork.ChildrenForkedWhileTheParentReadsOnOtherThreads). Two threads may both work it out the first time.
  static constinit std::atomic<unsigned> kept{0};
  unsigned cores = kept.load(std::memory_order_relaxed);
  if (cores == 0) {
    cores = usable_cores("");
    kept.store(cores, std::memory_order_relaxed);
  }
  return cores;
}

}  // namespace ferry::detail
