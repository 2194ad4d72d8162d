// NVIDIA GPUs from sysfs: BDF, NUMA node, BAR1 size.
#include <gtest/gtest.h>

#include <filesystem>

#include "platform/probes/gpu_sysfs.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
fs::path fixture(const char* scenario) { return fs::path(FERRY_TEST_FIXTURES) / "doctor" / scenario; }
}  // namespace

TEST(GpuSysfs, ParsesResourceLines) {
  const char* text =
      "0x00000000fd000000 0x00000000fdffffff 0x0000000000040200\n"
      "0x0000008000000000 0x000000bfffffffff 0x000000000014220c\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
  auto bar1 = parse_pci_resource_line(text, 1);
  ASSERT_TRUE(bar1.ok());
  EXPECT_EQ(bar1->size_bytes(), 256ull << 30);
  EXPECT_EQ(bar1->flags, 0x14220cu);
  EXPECT_EQ(parse_pci_resource_line(text, 0)->size_bytes(), 16u << 20);
  EXPECT_EQ(parse_pci_resource_line(text, 2)->size_bytes(), 0u);  // unused BAR
  EXPECT_EQ(parse_pci_resource_line(text, 7).status().code(), ferry::ErrorCode::invalid_argument);
  EXPECT_THAT(parse_pci_resource_line("0x10 0x0f 0x0\n", 0), StatusIs(ferry::ErrorCode::invalid_argument));  // end before start
  EXPECT_THAT(parse_pci_resource_line("0x10 zz 0x0\n", 0), StatusIs(ferry::ErrorCode::invalid_argument));
}

TEST(GpuSysfs, ClassifiesNvidiaGpus) {
  EXPECT_TRUE(is_nvidia_gpu(0x10de, 0x030200));  // 3D controller (data-centre GPUs)
  EXPECT_TRUE(is_nvidia_gpu(0x10de, 0x030000));  // VGA controller
  EXPECT_FALSE(is_nvidia_gpu(0x10de, 0x040300)); // the GPU's audio function
  EXPECT_FALSE(is_nvidia_gpu(0x10de, 0x068000)); // NVSwitch bridge
  EXPECT_FALSE(is_nvidia_gpu(0x1002, 0x030000));
}

TEST(GpuSysfs, FindsTheH200OnTheVm) {
  auto r = probe_gpus_sysfs(fixture("vm_no_udev_record"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->gpus.size(), 1u);
  const auto& g = r->gpus[0];
  EXPECT_EQ(g.bdf, "0000:00:06.0");
  EXPECT_EQ(g.device_id, 0x2335);
  EXPECT_EQ(g.class_code, 0x030200u);
  EXPECT_EQ(g.numa_node, 0);
  EXPECT_EQ(g.bar1_size_bytes, 256ull << 30);
  EXPECT_NE(g.evidence.back().find("= 262144 MiB"), std::string::npos) << g.evidence.back();
}

TEST(GpuSysfs, FindsGpusOnTwoSocketsAndSkipsOtherDevices) {
  auto r = probe_gpus_sysfs(fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->gpus.size(), 2u);  // not the Matrox VGA, the NIC, the NVMe or the bridges
  EXPECT_EQ(r->gpus[0].bdf, "0000:04:00.0");
  EXPECT_EQ(r->gpus[0].numa_node, 0);
  EXPECT_EQ(r->gpus[1].bdf, "0000:81:00.0");
  EXPECT_EQ(r->gpus[1].numa_node, 1);
  EXPECT_EQ(r->gpus[1].bar1_size_bytes, 256ull << 30);
}

TEST(GpuSysfs, NoPciBusMeansNoGpus) {
  auto r = probe_gpus_sysfs(ferry::testing::test_dir());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->gpus.empty());
  EXPECT_EQ(r->evidence.at(0), "/sys/bus/pci/devices: absent (no PCI bus visible)");
}
