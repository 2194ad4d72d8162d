// nvidia-fs: module, version and device nodes.
#include <gtest/gtest.h>

#include <filesystem>

#include "platform/probes/nvidia_fs.hpp"

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
fs::path fixture(const char* scenario) { return fs::path(FERRY_TEST_FIXTURES) / "doctor" / scenario; }
}  // namespace

TEST(NvidiaFs, FindsTheModuleLine) {
  const char* mods =
      "nvidia_fs_extra 1 0 - Live 0x0\n"
      "nvidia_fs 249856 4 - Live 0xffffffffc1a00000 (OE)\n"
      "nvidia 14376960 12 nvidia_fs, Live 0x0 (POE)\n";
  auto m = find_kernel_module(mods, "nvidia-fs");  // '-' and '_' are the same in module names
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->name, "nvidia_fs");
  EXPECT_EQ(m->size_bytes, 249856u);
  EXPECT_EQ(m->use_count, 4);
  EXPECT_EQ(m->state, "Live");
  EXPECT_FALSE(find_kernel_module("nvidia_fs_extra 1 0 - Live 0x0\n", "nvidia_fs").has_value());
  EXPECT_FALSE(find_kernel_module("", "nvidia_fs").has_value());
}

TEST(NvidiaFs, ParsesVersionText) {
  EXPECT_EQ(parse_nvidia_fs_version("version: 2.17.5\n"), "2.17.5");
  EXPECT_EQ(parse_nvidia_fs_version("2.20\n"), "2.20");
  EXPECT_EQ(parse_nvidia_fs_version("GDS driver\nversion: 2.18.3.\n"), "2.18.3");
  EXPECT_FALSE(parse_nvidia_fs_version("no number here\n").has_value());
}

TEST(NvidiaFs, AbsentOnTheVm) {
  auto r = probe_nvidia_fs(fixture("vm_no_udev_record"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->module_loaded);
  EXPECT_FALSE(r->proc_entry_present);
  EXPECT_FALSE(r->version.has_value());
  EXPECT_TRUE(r->device_nodes.empty());  // /dev/nvidia0 and nvidiactl are not nvidia-fs nodes
  EXPECT_FALSE(r->loaded_but_nodes_missing());
  EXPECT_EQ(r->evidence.at(0), "/proc/modules: no nvidia_fs");
}

TEST(NvidiaFs, LoadedOnBareMetal) {
  auto r = probe_nvidia_fs(fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->module_loaded);
  EXPECT_TRUE(r->proc_entry_present);
  EXPECT_EQ(r->version, "2.17.5");
  EXPECT_EQ(r->device_nodes, (std::vector<std::string>{"/dev/nvidia-fs0", "/dev/nvidia-fs1", "/dev/nvidia-fs2",
                                                       "/dev/nvidia-fs3", "/dev/nvidia-fs10"}));
  EXPECT_FALSE(r->loaded_but_nodes_missing());
}

TEST(NvidiaFs, LoadedButInvisibleInAContainer) {
  auto r = probe_nvidia_fs(fixture("container_no_udev"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->module_loaded);
  EXPECT_TRUE(r->device_nodes.empty());
  EXPECT_TRUE(r->loaded_but_nodes_missing());
  EXPECT_NE(r->evidence.back().find("--device /dev/nvidia-fs0"), std::string::npos);
}

TEST(NvidiaFs, EmptyRootMeansAbsentNotError) {
  auto r = probe_nvidia_fs(fixture("no_such_scenario"));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->module_loaded);
}
