// IOMMU state from sysfs and the kernel command line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "platform/probes/iommu.hpp"
#include "support/test_files.hpp"

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
fs::path fixture(const char* scenario) { return fs::path(FERRY_TEST_FIXTURES) / "doctor" / scenario; }
void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}
}  // namespace

TEST(IommuCmdline, ParsesSwitches) {
  auto c = parse_iommu_cmdline("BOOT_IMAGE=/vmlinuz ro intel_iommu=on,sm_on iommu=pt quiet\n");
  EXPECT_EQ(c.intel_iommu, "on");
  EXPECT_EQ(c.iommu, "pt");
  EXPECT_FALSE(c.amd_iommu.has_value());
  EXPECT_TRUE(c.says_passthrough());
  EXPECT_FALSE(c.says_off());
  EXPECT_EQ(c.tokens, (std::vector<std::string>{"intel_iommu=on,sm_on", "iommu=pt"}));
}

TEST(IommuCmdline, OffSwitches) {
  EXPECT_TRUE(parse_iommu_cmdline("amd_iommu=off").says_off());
  EXPECT_TRUE(parse_iommu_cmdline("iommu=off").says_off());
  EXPECT_TRUE(parse_iommu_cmdline("intel_iommu=sm_on,off").says_off());
  EXPECT_FALSE(parse_iommu_cmdline("intel_iommu=on").says_off());
}

TEST(IommuCmdline, GenericPassthroughAndLastOneWins) {
  EXPECT_TRUE(parse_iommu_cmdline("iommu.passthrough=1").says_passthrough());
  EXPECT_FALSE(parse_iommu_cmdline("iommu=pt iommu.passthrough=0").says_passthrough());
  EXPECT_TRUE(parse_iommu_cmdline("iommu=nopt iommu=pt").says_passthrough());
  EXPECT_FALSE(parse_iommu_cmdline("iommu=pt iommu=nopt").says_passthrough());
}

TEST(IommuCmdline, IgnoresLookalikes) {
  auto c = parse_iommu_cmdline("noiommu=1 xintel_iommu=on vfio.enable_unsafe_noiommu_mode=1 intel_iommu");
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_FALSE(c.intel_iommu.has_value());
}

TEST(Iommu, OffOnTheVm) {
  auto r = probe_iommu(fixture("vm_no_udev_record"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->units.empty());
  EXPECT_EQ(r->group_count, 0);  // the placeholder file in the empty directory is not a group
  EXPECT_EQ(r->mode, IommuMode::off);
  EXPECT_STREQ(iommu_mode_name(r->mode), "off");
  EXPECT_NE(r->security_note.find("not isolated"), std::string::npos);
  EXPECT_EQ(r->evidence.back(), "/proc/cmdline: no IOMMU switches");
}

TEST(Iommu, OnWithGroupsOnBareMetal) {
  auto r = probe_iommu(fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->units, (std::vector<std::string>{"dmar0", "dmar1"}));
  EXPECT_EQ(r->group_count, 4);
  EXPECT_EQ(r->group_types.at("DMA-FQ"), 3);
  EXPECT_EQ(r->group_types.at("DMA"), 1);
  EXPECT_EQ(r->cmdline.intel_iommu, "on");
  EXPECT_EQ(r->mode, IommuMode::translated);
  // Never suggest turning it off without saying what is lost.
  EXPECT_NE(r->security_note.find("give up that DMA isolation"), std::string::npos);
  EXPECT_EQ(r->evidence.at(1), "/sys/kernel/iommu_groups: 4 groups, types: DMA=1 DMA-FQ=3");
}

TEST(Iommu, PassthroughFromIdentityDomains) {
  fs::path root = ferry::testing::test_dir();
  write(root / "sys/kernel/iommu_groups/0/type", "identity\n");
  write(root / "sys/kernel/iommu_groups/1/type", "identity\n");
  write(root / "proc/cmdline", "ro iommu=pt\n");
  auto r = probe_iommu(root);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->mode, IommuMode::passthrough);
  EXPECT_NE(r->security_note.find("not restricted"), std::string::npos);
}

TEST(Iommu, MissingProcCmdlineIsNotAnError) {
  fs::path root = ferry::testing::test_dir();
  auto r = probe_iommu(root);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->mode, IommuMode::off);
  EXPECT_EQ(r->evidence.back(), "/proc/cmdline: absent");
}
