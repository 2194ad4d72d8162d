// PCIe relationship between a storage controller and GPUs.
#include <gtest/gtest.h>

#include <filesystem>

#include "platform/probes/pci_topology.hpp"
#include "support/status_matchers.hpp"

using ferry::testing::StatusIs;

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
fs::path fixture(const char* scenario) { return fs::path(FERRY_TEST_FIXTURES) / "doctor" / scenario; }

PciLocation locate(const char* scenario, const char* bdf) {
  auto r = probe_pci_location(bdf, fixture(scenario));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : PciLocation{};
}

PciLocation synthetic(const char* bdf, const char* path, int numa) {
  PciLocation l;
  l.bdf = bdf;
  l.sysfs_path = path;
  l.path = parse_pci_device_path(path);
  l.numa_node = numa;
  return l;
}
}  // namespace

TEST(PciTopology, ReadsLocationAndNumaNode) {
  auto g = locate("baremetal_gds", "0000:81:00.0");
  EXPECT_EQ(g.sysfs_path, "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0");
  EXPECT_EQ(g.path.host_bridge, "pci0000:80");
  EXPECT_EQ(g.numa_node, 1);
}

TEST(PciTopology, NvmeAndGpuUnderOneSwitch) {
  auto r = relate_pci(locate("baremetal_gds", "0000:03:00.0"), locate("baremetal_gds", "0000:04:00.0"));
  EXPECT_EQ(r.relation, PciRelation::same_pcie_switch);
  EXPECT_STREQ(pci_relation_name(r.relation), "same_pcie_switch");
  EXPECT_EQ(r.common_bridge, "0000:01:00.0");
  EXPECT_NE(r.detail.find("below root port 0000:00:01.0"), std::string::npos) << r.detail;
}

TEST(PciTopology, GpuOnTheOtherSocket) {
  auto r = relate_pci(locate("baremetal_gds", "0000:03:00.0"), locate("baremetal_gds", "0000:81:00.0"));
  EXPECT_EQ(r.relation, PciRelation::across_sockets);
  EXPECT_TRUE(r.common_bridge.empty());
  EXPECT_NE(r.detail.find("NUMA 0"), std::string::npos);
  EXPECT_NE(r.detail.find("NUMA 1"), std::string::npos);
}

TEST(PciTopology, VmDiskAndGpuShareOnlyTheHostBridge) {
  auto r = relate_pci(locate("vm_no_udev_record", "0000:00:05.0"), locate("vm_no_udev_record", "0000:00:06.0"));
  EXPECT_EQ(r.relation, PciRelation::same_root_complex);
  EXPECT_TRUE(r.common_bridge.empty());
}

TEST(PciTopology, SharedRootPortOnlyIsSameRootComplex) {
  auto a = synthetic("0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0);
  auto b = synthetic("0000:01:00.1", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.1", 0);
  auto r = relate_pci(a, b);
  EXPECT_EQ(r.relation, PciRelation::same_root_complex);
  EXPECT_EQ(r.common_bridge, "0000:00:01.0");
}

TEST(PciTopology, DifferentHostBridgesOnOneNode) {
  auto a = synthetic("0000:00:05.0", "/sys/devices/pci0000:00/0000:00:05.0", 0);
  auto b = synthetic("0000:40:01.0", "/sys/devices/pci0000:40/0000:40:01.0", 0);
  EXPECT_EQ(relate_pci(a, b).relation, PciRelation::same_numa_node);
  b.numa_node = -1;
  EXPECT_EQ(relate_pci(a, b).relation, PciRelation::unknown);
}

TEST(PciTopology, SameFunctionOrAncestor) {
  auto a = synthetic("0000:00:01.0", "/sys/devices/pci0000:00/0000:00:01.0", 0);
  auto b = synthetic("0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0);
  EXPECT_EQ(relate_pci(a, b).relation, PciRelation::same_device);
  EXPECT_EQ(relate_pci(b, b).relation, PciRelation::same_device);
}

TEST(PciTopology, MissingDeviceIsNotFound) {
  auto r = probe_pci_location("0000:99:00.0", fixture("baremetal_gds"));
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::not_found));
}
