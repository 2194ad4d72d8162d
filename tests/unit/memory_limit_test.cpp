// usable_memory_bytes: physical memory, or a cgroup's memory limit where that is less (a container). The
// cgroup files are read under a folder laid out as / (v2 and v1, at the mount's root and at the process's path).
#include "base/memory_limit.hpp"

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

}  // namespace
}  // namespace ferry
