// udev record lookup: the four states the doctor distinguishes.
#include <gtest/gtest.h>

#include <filesystem>

#include "platform/probes/udev_record.hpp"

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
fs::path fixture(const char* scenario) { return fs::path(FERRY_TEST_FIXTURES) / "doctor" / scenario; }
}  // namespace

TEST(UdevRecord, ParsesOnlyPropertyLines) {
  auto p = parse_udev_properties(
      "S:disk/by-uuid/abc\nI:1732\nE:ID_FS_TYPE=ext4\r\nE:ID_FS_USAGE=filesystem\nE:EMPTY=\nE:=novalue\n"
      "E:NOEQUALS\nG:systemd\nE:ID_FS_TYPE=xfs\nE:WITH_EQ=a=b");
  EXPECT_EQ(p.size(), 4u);
  EXPECT_EQ(p.at("ID_FS_TYPE"), "xfs");  // the later line wins
  EXPECT_EQ(p.at("ID_FS_USAGE"), "filesystem");
  EXPECT_EQ(p.at("EMPTY"), "");
  EXPECT_EQ(p.at("WITH_EQ"), "a=b");
  EXPECT_EQ(p.count("NOEQUALS"), 0u);
}

TEST(UdevRecord, ContainerWithoutRunUdev) {
  auto r = probe_udev_record(252, 0, fixture("container_no_udev"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->state, UdevRecordState::no_udev_dir);
  EXPECT_STREQ(udev_record_state_name(r->state), "no_udev_dir");
  EXPECT_NE(r->evidence.at(0).find("--volume /run/udev"), std::string::npos);
}

TEST(UdevRecord, VmWithoutRecordForItsDisk) {
  auto r = probe_udev_record(252, 0, fixture("vm_no_udev_record"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, UdevRecordState::no_record);
  EXPECT_EQ(r->record_path, "/run/udev/data/b252:0");
  EXPECT_NE(r->evidence.at(0).find("5027"), std::string::npos);
}

TEST(UdevRecord, RecordWithoutIdFsUsage) {
  auto r = probe_udev_record(252, 0, fixture("vm_udev_partial"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, UdevRecordState::missing_id_fs_usage);
  EXPECT_EQ(r->properties.at("ID_PATH"), "pci-0000:00:05.0");
  EXPECT_TRUE(r->id_fs_usage.empty());
  // The same on bare metal for a device-mapper record.
  r = probe_udev_record(253, 0, fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, UdevRecordState::missing_id_fs_usage);
}

TEST(UdevRecord, GoodRecord) {
  auto r = probe_udev_record(252, 0, fixture("vm_udev_ok"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, UdevRecordState::ok);
  EXPECT_EQ(r->id_fs_usage, "filesystem");
  EXPECT_EQ(r->id_fs_type, "ext4");
  EXPECT_EQ(r->evidence.at(0), "/run/udev/data/b252:0: ID_FS_USAGE=filesystem ID_FS_TYPE=ext4");
}

TEST(UdevRecord, CharacterDeviceRecordIsNotABlockRecord) {
  // The VM has /run/udev/data/c1:3; a lookup for block 1:3 must not find it.
  auto r = probe_udev_record(1, 3, fixture("vm_no_udev_record"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, UdevRecordState::no_record);
}
