// usable_memory_bytes and usable_cores: physical memory and the affinity mask's cores, or a cgroup's memory limit
// and CPU quota where those are less (a container). The cgroup files are read under a folder laid out as / (v2 and
// v1, at the mount's root and at the process's path).
#include "base/process_limits.hpp"

#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "support/test_files.hpp"

namespace ferry {
namespace {

namespace fs = std::filesystem;

std::uint64_t physical() {
  return static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

void put(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text << "\n";
}

TEST(MemoryLimit, WithoutCgroupFilesItIsPhysicalMemory) {
  const fs::path root = testing::test_dir() / "empty-root";
  fs::create_directories(root);
  EXPECT_EQ(detail::usable_memory_bytes(root.string()), physical());
}

TEST(MemoryLimit, AContainersV2LimitCapsItAndMaxDoesNot) {
  const fs::path root = testing::test_dir() / "v2-root";
  put(root / "proc/self/cgroup", "0::/pod/app");
  put(root / "sys/fs/cgroup/memory.max", "max");
  put(root / "sys/fs/cgroup/pod/app/memory.max", "1073741824");
  EXPECT_EQ(detail::usable_memory_bytes(root.string()), std::min<std::uint64_t>(physical(), 1 << 30));
  put(root / "sys/fs/cgroup/pod/app/memory.max", "max");
  EXPECT_EQ(detail::usable_memory_bytes(root.string()), physical());
}

TEST(MemoryLimit, AV1LimitCapsItAndTheNoLimitValueDoesNot) {
  const fs::path root = testing::test_dir() / "v1-root";
  put(root / "proc/self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/");
  put(root / "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712");  // the kernel's "none"
  EXPECT_EQ(detail::usable_memory_bytes(root.string()), physical());
  put(root / "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912");
  EXPECT_EQ(detail::usable_memory_bytes(root.string()), std::min<std::uint64_t>(physical(), 512 << 20));
}

TEST(MemoryLimit, ANamespacedContainerSeesItsLimitAtTheMountsRoot) {
  const fs::path root = testing::test_dir() / "ns-root";
  put(root / "proc/self/cgroup", "0::/");
  put(root / "sys/fs/cgroup/memory.max", "2147483648");
  EXPECT_EQ(detail::usable_memory_bytes(root.string()), std::min<std::uint64_t>(physical(), 2ull << 30));
}

TEST(MemoryLimit, TextThatIsNotANumberCapsNothing) {
  const fs::path root = testing::test_dir() / "junk-root";
  put(root / "sys/fs/cgroup/memory.max", "-5");
  put(root / "sys/fs/cgroup/memory/memory.limit_in_bytes", "99999999999999999999999");
  EXPECT_EQ(detail::usable_memory_bytes(root.string()), physical());
}

unsigned affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return static_cast<unsigned>(CPU_COUNT(&set));
}

TEST(CoreLimit, WithoutCgroupFilesItIsTheAffinityMasksCores) {
  const fs::path root = testing::test_dir() / "empty-root";
  fs::create_directories(root);
  EXPECT_EQ(detail::usable_cores(root.string()), affinity_cores());
  EXPECT_EQ(detail::usable_cores(), detail::usable_cores(""));
}

TEST(CoreLimit, AV2QuotaCapsItAFractionCountsAsACoreAndMaxDoesNot) {
  const fs::path root = testing::test_dir() / "cpu-v2-root";
  put(root / "proc/self/cgroup", "0::/pod/app");
  put(root / "sys/fs/cgroup/cpu.max", "max 100000");
  put(root / "sys/fs/cgroup/pod/app/cpu.max", "50000 100000");  // half a core: one
  EXPECT_EQ(detail::usable_cores(root.string()), 1u);
  put(root / "sys/fs/cgroup/pod/app/cpu.max", "150000 100000");  // a core and a half: two
  EXPECT_EQ(detail::usable_cores(root.string()), std::min(affinity_cores(), 2u));
  put(root / "sys/fs/cgroup/pod/app/cpu.max", "max 100000");
  EXPECT_EQ(detail::usable_cores(root.string()), affinity_cores());
}

TEST(CoreLimit, AV1QuotaCapsItAndMinusOneDoesNot) {
  const fs::path root = testing::test_dir() / "cpu-v1-root";
  put(root / "proc/self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/");
  put(root / "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1");
  put(root / "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000");
  EXPECT_EQ(detail::usable_cores(root.string()), affinity_cores());
  put(root / "sys/fs/cgroup/cpu/docker/abc/cpu.cfs_quota_us", "100000");
  put(root / "sys/fs/cgroup/cpu/docker/abc/cpu.cfs_period_us", "100000");
  EXPECT_EQ(detail::usable_cores(root.string()), 1u);
}

TEST(CoreLimit, TextThatIsNotAQuotaCapsNothing) {
  const fs::path root = testing::test_dir() / "cpu-junk-root";
  put(root / "sys/fs/cgroup/cpu.max", "lots 100000");
  put(root / "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "100000");  // no period beside it
  EXPECT_EQ(detail::usable_cores(root.string()), affinity_cores());
  put(root / "sys/fs/cgroup/cpu.max", "100000 0");
  EXPECT_EQ(detail::usable_cores(root.string()), affinity_cores());
}

}  // namespace
}  // namespace ferry
