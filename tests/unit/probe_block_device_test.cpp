// Block device behind a mount: sysfs resolution, partitions, device-mapper, PCI controller.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "platform/probes/block_device.hpp"
#include "platform/probes/probe_fs.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
fs::path fixture(const char* scenario) { return fs::path(FERRY_TEST_FIXTURES) / "doctor" / scenario; }
}  // namespace

TEST(BlockDevice, VirtioDiskOnTheVm) {
  auto r = probe_block_device(252, 0, fixture("vm_no_udev_record"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "vda");
  EXPECT_EQ(r->disk_name, "vda");
  EXPECT_FALSE(r->is_partition);
  EXPECT_EQ(r->sysfs_path, "/sys/devices/pci0000:00/0000:00:05.0/virtio2/block/vda");
  EXPECT_EQ(r->controller_bdf(), "0000:00:05.0");
  EXPECT_EQ(r->pci.host_bridge, "pci0000:00");
  EXPECT_EQ(r->pci.bdf_chain, (std::vector<std::string>{"0000:00:05.0"}));
  EXPECT_TRUE(r->no_pci_reason.empty());
  EXPECT_EQ(r->evidence.at(0), "/sys/dev/block/252:0 -> /sys/devices/pci0000:00/0000:00:05.0/virtio2/block/vda");
}

TEST(BlockDevice, NvmePartitionMapsToItsDisk) {
  auto r = probe_block_device(259, 2, fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "nvme0n1p2");
  EXPECT_EQ(r->disk_name, "nvme0n1");
  EXPECT_TRUE(r->is_partition);
  EXPECT_EQ(r->controller_bdf(), "0000:03:00.0");
  EXPECT_EQ(r->pci.bdf_chain,
            (std::vector<std::string>{"0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"}));
}

TEST(BlockDevice, WholeNvmeDisk) {
  auto r = probe_block_device(259, 0, fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->name, "nvme0n1");
  EXPECT_EQ(r->disk_name, "nvme0n1");
  EXPECT_FALSE(r->is_partition);
  EXPECT_EQ(r->controller_bdf(), "0000:03:00.0");
}

TEST(BlockDevice, DeviceMapperHasNoPciParentAndSaysSo) {
  auto r = probe_block_device(253, 0, fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "dm-0");
  EXPECT_EQ(r->dm_name, "vg0-scratch");
  EXPECT_EQ(r->slaves, (std::vector<std::string>{"nvme0n1p3"}));
  EXPECT_FALSE(r->pci.has_pci());
  EXPECT_TRUE(r->controller_bdf().empty());
  EXPECT_EQ(r->no_pci_reason,
            "dm-0 is a virtual device-mapper device with no PCI parent in sysfs; it sits on nvme0n1p3");
}

TEST(BlockDevice, AnonymousDeviceIsNotFound) {
  auto r = probe_block_device(0, 45, fixture("baremetal_gds"));
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::not_found));
  EXPECT_NE(r.status().message().find("anonymous device"), std::string::npos) << r.status().message();
}

TEST(PciPath, ParsesHostBridgeAndChain) {
  auto p = parse_pci_device_path("/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/nvme/nvme1/nvme1n1");
  EXPECT_EQ(p.host_bridge, "pci0000:80");
  EXPECT_EQ(p.bdf_chain, (std::vector<std::string>{"0000:80:01.0", "0000:81:00.0"}));
  EXPECT_EQ(p.leaf(), "0000:81:00.0");
  EXPECT_FALSE(parse_pci_device_path("/sys/devices/virtual/block/loop0").has_pci());
  EXPECT_FALSE(parse_pci_device_path("/sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1").has_pci());
  // A platform device (e.g. an SoC's SATA) has no PCI part either.
  EXPECT_FALSE(parse_pci_device_path("/sys/devices/platform/soc/ahci/ata1/host0/block/sda").has_pci());
}

TEST(PciPath, RecognisesBdfs) {
  EXPECT_TRUE(is_pci_bdf("0000:00:05.0"));
  EXPECT_TRUE(is_pci_bdf("10000:00:05.0") == false);  // 5-digit domains (VMD) are not handled
  EXPECT_FALSE(is_pci_bdf("0000:00:05.8"));
  EXPECT_FALSE(is_pci_bdf("0000:00:05"));
  EXPECT_FALSE(is_pci_bdf("pci0000:00"));
}

TEST(ResolveInRoot, FollowsRelativeAndAbsoluteLinksInsideTheRoot) {
  fs::path root = ferry::testing::test_dir();
  fs::create_directories(root / "sys/devices/real");
  fs::create_directories(root / "sys/dev");
  fs::create_symlink("../devices/real", root / "sys/dev/rel");
  fs::create_symlink("/sys/devices/real", root / "sys/dev/abs");  // absolute: must stay inside root
  fs::create_symlink("/sys/dev/rel", root / "sys/dev/chain");
  auto a = resolve_in_root(root, "/sys/dev/rel");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(*a, "/sys/devices/real");
  auto b = resolve_in_root(root, "/sys/dev/abs");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "/sys/devices/real");
  auto c = resolve_in_root(root, "/sys/dev/chain/../real");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, "/sys/devices/real");
}

TEST(ResolveInRoot, ReportsMissingComponentsAndLoops) {
  fs::path root = ferry::testing::test_dir();
  fs::create_directories(root / "d");
  fs::create_symlink("b", root / "d/a");
  fs::create_symlink("a", root / "d/b");
  auto loop = resolve_in_root(root, "/d/a");
  ASSERT_THAT(loop, StatusIs(ferry::ErrorCode::failed_precondition));
  auto missing = resolve_in_root(root, "/d/nothing/x");
  ASSERT_THAT(missing, StatusIs(ferry::ErrorCode::not_found));
  EXPECT_NE(missing.status().message().find("\"/d/nothing\""), std::string::npos) << missing.status().message();
}
