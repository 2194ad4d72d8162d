// Mountinfo parsing and the longest-prefix mount lookup, on fixture trees.
#include <gtest/gtest.h>

#include <filesystem>

#include "platform/probes/mountinfo.hpp"
#include "support/status_matchers.hpp"

using ferry::testing::StatusIs;

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
fs::path fixture(const char* scenario) { return fs::path(FERRY_TEST_FIXTURES) / "doctor" / scenario; }

MountEntry probe_ok(const char* scenario, const char* path) {
  auto r = probe_mount_for_path(path, fixture(scenario));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok() || !r->mount) return {};
  return *r->mount;
}
}  // namespace

TEST(Mountinfo, ParsesEveryFieldOfALine) {
  auto t = parse_mountinfo(
      "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:4 - ext3 /dev/root rw,errors=continue\n");
  ASSERT_EQ(t.entries.size(), 1u);
  const auto& e = t.entries[0];
  EXPECT_EQ(e.mount_id, 36);
  EXPECT_EQ(e.parent_id, 35);
  EXPECT_EQ(e.major, 98u);
  EXPECT_EQ(e.minor, 0u);
  EXPECT_EQ(e.root, "/mnt1");
  EXPECT_EQ(e.mount_point, "/mnt2");
  EXPECT_EQ(e.mount_options, "rw,noatime");
  EXPECT_EQ(e.optional_fields, (std::vector<std::string>{"master:1", "shared:4"}));
  EXPECT_EQ(e.fs_type, "ext3");
  EXPECT_EQ(e.source, "/dev/root");
  EXPECT_EQ(e.super_options, "rw,errors=continue");
  EXPECT_TRUE(e.is_subtree_bind());
  EXPECT_TRUE(t.malformed_lines.empty());
}

TEST(Mountinfo, DecodesOctalEscapes) {
  EXPECT_EQ(decode_mount_escapes("/mnt/my\\040data"), "/mnt/my data");
  EXPECT_EQ(decode_mount_escapes("/a\\011b\\012c"), "/a\tb\nc");
  EXPECT_EQ(decode_mount_escapes("/weird\\134name"), "/weird\\name");
  // Not a full three-digit escape: kept verbatim.
  EXPECT_EQ(decode_mount_escapes("/x\\04"), "/x\\04");
  EXPECT_EQ(decode_mount_escapes("/x\\9ab"), "/x\\9ab");
}

TEST(Mountinfo, FindsLongestPrefixMount) {
  auto m = probe_ok("baremetal_gds", "/boot/efi/EFI/ubuntu/grubx64.efi");
  EXPECT_EQ(m.mount_point, "/boot/efi");
  EXPECT_EQ(m.fs_type, "vfat");
  EXPECT_EQ(m.source, "/dev/nvme0n1p1");
  m = probe_ok("baremetal_gds", "/etc/passwd");
  EXPECT_EQ(m.mount_point, "/");
  EXPECT_EQ(m.fs_type, "ext4");
  EXPECT_EQ(m.major, 259u);
  EXPECT_EQ(m.minor, 2u);
}

TEST(Mountinfo, MatchesOnlyWholePathComponents) {
  // "/scratch" must not claim "/scratchpad"; "/scratchpad" has its own mount.
  EXPECT_EQ(probe_ok("baremetal_gds", "/scratchpad/run1/x.bin").mount_id, 45);
  // And "/scratchpadx" belongs to neither: it falls back to "/".
  EXPECT_EQ(probe_ok("baremetal_gds", "/scratchpadx/y").mount_point, "/");
}

TEST(Mountinfo, LaterMountAtSamePointIsOnTop) {
  // /scratch has xfs (41) and then tmpfs (44) mounted over it: the tmpfs is what a path there sees.
  auto m = probe_ok("baremetal_gds", "/scratch/data.bin");
  EXPECT_EQ(m.mount_id, 44);
  EXPECT_EQ(m.fs_type, "tmpfs");
}

TEST(Mountinfo, EscapedMountPointMatchesDecodedPath) {
  auto m = probe_ok("baremetal_gds", "/mnt/my data/shard-0.bin");
  EXPECT_EQ(m.mount_id, 42);
  EXPECT_EQ(m.root, "/home/alice/My Data");  // a bind mount of a subdirectory
  EXPECT_TRUE(m.is_subtree_bind());
  EXPECT_EQ(probe_ok("baremetal_gds", "/mnt/weird\\name/f").fs_type, "tmpfs");
}

TEST(Mountinfo, BindMountsInAContainerKeepTheBlockDevice) {
  auto m = probe_ok("container_no_udev", "/data/train/part-0001.bin");
  EXPECT_EQ(m.mount_id, 625);
  EXPECT_EQ(m.root, "/srv/datasets");
  EXPECT_EQ(m.major, 252u);
  EXPECT_EQ(m.minor, 0u);
  EXPECT_EQ(m.fs_type, "ext4");
  m = probe_ok("container_no_udev", "/data/shard one/a.bin");
  EXPECT_EQ(m.mount_id, 626);
  EXPECT_EQ(m.mount_options, "ro,relatime");
  EXPECT_EQ(probe_ok("container_no_udev", "/usr/lib/x").fs_type, "overlay");
}

TEST(Mountinfo, NormalisesThePathLexically) {
  EXPECT_EQ(probe_ok("baremetal_gds", "/mnt//my data/../my data/./f").mount_id, 42);
  EXPECT_EQ(probe_ok("baremetal_gds", "/boot/efi/../x").mount_point, "/");
}

TEST(Mountinfo, CollectsMalformedLinesAndKeepsGoing) {
  auto r = probe_mount_for_path("/", fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->malformed_lines.size(), 1u);
  EXPECT_EQ(r->malformed_lines[0], "line 8: this line is not mountinfo");
  EXPECT_EQ(r->entry_count, 9u);

  auto t = parse_mountinfo("1 2 3:4 / /x rw - ext4\n"       // missing source
                           "a 2 3:4 / /x rw - ext4 s o\n"   // non-numeric id
                           "1 2 34 / /x rw - ext4 s o\n"    // no major:minor
                           "1 2 3:4 / x rw - ext4 s o\n"    // relative mount point
                           "1 2 3:4 / /x rw shared:1 ext4 s o\n"  // no separator
                           "\n"
                           "1 2 3:4 / /ok rw - ext4 /dev/sda1 rw\n");
  EXPECT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.malformed_lines.size(), 5u);
}

TEST(Mountinfo, EmptyTableHoldsNothing) {
  MountTable t;
  EXPECT_EQ(find_mount_for_path(t, "/x"), nullptr);
}

TEST(Mountinfo, MissingFileIsNotFound) {
  auto r = probe_mount_for_path("/", fixture("no_such_scenario"));
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::not_found));
  EXPECT_NE(r.status().path().find("proc/self/mountinfo"), std::string::npos);
}

TEST(Mountinfo, EvidenceNamesTheMount) {
  auto r = probe_mount_for_path("/data/x", fixture("container_no_udev"));
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->evidence.empty());
  EXPECT_NE(r->evidence[0].find("ext4 from /dev/vda, device 252:0, root \"/srv/datasets\""), std::string::npos)
      << r->evidence[0];
}
