// ACS extended capability parsing and the bridges between a storage device and a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "platform/probes/pci_acs.hpp"
#include "support/status_matchers.hpp"

using ferry::testing::StatusIs;

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
fs::path fixture(const char* scenario) { return fs::path(FERRY_TEST_FIXTURES) / "doctor" / scenario; }

void put32(std::vector<std::uint8_t>& b, std::size_t off, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t header(std::uint16_t id, std::uint8_t ver, std::uint16_t next) {
  return id | std::uint32_t(ver) << 16 | std::uint32_t(next) << 20;
}
}  // namespace

TEST(PciAcs, FindsCapabilityAfterAnotherOne) {
  std::vector<std::uint8_t> cfg(4096);
  put32(cfg, 0x100, header(0x0001, 2, 0x148));  // AER -> 0x148
  put32(cfg, 0x148, header(0x000D, 1, 0));
  put32(cfg, 0x14c, 0x001D005F);                 // capability 0x5F, control 0x1D
  auto a = parse_acs_capability(cfg);
  EXPECT_EQ(a.state, AcsState::present);
  EXPECT_EQ(a.offset, 0x148);
  EXPECT_EQ(a.capability.raw, 0x5F);
  EXPECT_EQ(a.control.raw, 0x1D);
  EXPECT_TRUE(a.control.source_validation());
  EXPECT_FALSE(a.control.translation_blocking());
  EXPECT_TRUE(a.control.p2p_request_redirect());
  EXPECT_TRUE(a.control.p2p_completion_redirect());
  EXPECT_TRUE(a.control.upstream_forwarding());
  EXPECT_FALSE(a.control.p2p_egress_control());
  EXPECT_TRUE(a.redirects_p2p());
  EXPECT_EQ(a.control.to_string(), "SV RR CR UF");
  EXPECT_EQ(a.capability.to_string(), "SV TB RR CR UF DT");
  EXPECT_EQ(AcsFlags{}.to_string(), "none");
}

TEST(PciAcs, ShortConfigSpaces) {
  std::vector<std::uint8_t> cfg(64);
  EXPECT_EQ(parse_acs_capability(cfg).state, AcsState::unreadable);  // what a non-root reader gets
  cfg.resize(256);
  EXPECT_EQ(parse_acs_capability(cfg).state, AcsState::no_extended_space);
  EXPECT_EQ(parse_acs_capability({}).state, AcsState::unreadable);
}

TEST(PciAcs, AbsentWhenTheListHasNoAcs) {
  std::vector<std::uint8_t> cfg(4096);
  EXPECT_EQ(parse_acs_capability(cfg).state, AcsState::absent);  // empty list (header 0)
  put32(cfg, 0x100, header(0x0001, 2, 0));
  EXPECT_EQ(parse_acs_capability(cfg).state, AcsState::absent);
  put32(cfg, 0x100, 0xffffffff);  // device gone: all ones
  EXPECT_EQ(parse_acs_capability(cfg).state, AcsState::absent);
}

TEST(PciAcs, MalformedListsStop) {
  std::vector<std::uint8_t> cfg(4096);
  put32(cfg, 0x100, header(0x0001, 2, 0x140));
  put32(cfg, 0x140, header(0x0002, 1, 0x100));  // points back: would loop
  EXPECT_EQ(parse_acs_capability(cfg).state, AcsState::absent);
  put32(cfg, 0x140, header(0x0002, 1, 0xffc));  // points past a truncated image
  cfg.resize(0x200);
  EXPECT_EQ(parse_acs_capability(cfg).state, AcsState::absent);
  put32(cfg, 0x100, header(0x0001, 2, 0x40));   // points into the legacy space
  EXPECT_EQ(parse_acs_capability(cfg).state, AcsState::absent);
}

TEST(PciAcs, ReadsOneBridgeFromSysfs) {
  auto b = probe_acs("0000:02:00.0", fixture("baremetal_gds"));
  EXPECT_EQ(b.acs.state, AcsState::present);
  EXPECT_EQ(b.acs.offset, 0x148);
  EXPECT_EQ(b.evidence,
            "/sys/bus/pci/devices/0000:02:00.0/config: ACS at 0x148, capability SV TB RR CR UF DT, "
            "control SV RR CR UF");
  auto missing = probe_acs("0000:77:00.0", fixture("baremetal_gds"));
  EXPECT_EQ(missing.acs.state, AcsState::unreadable);
}

TEST(PciAcs, PathThroughASwitchWithRedirectOnOnePort) {
  auto r = probe_acs_path("0000:03:00.0", "0000:04:00.0", fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->bridges.size(), 3u);
  EXPECT_EQ(r->bridges[0].bdf, "0000:02:00.0");  // NVMe's downstream port: redirect on
  EXPECT_TRUE(r->bridges[0].acs.redirects_p2p());
  EXPECT_EQ(r->bridges[1].bdf, "0000:01:00.0");  // switch upstream port: no ACS
  EXPECT_EQ(r->bridges[1].acs.state, AcsState::absent);
  EXPECT_EQ(r->bridges[2].bdf, "0000:02:01.0");  // GPU's downstream port: ACS present, nothing enabled
  EXPECT_EQ(r->bridges[2].acs.state, AcsState::present);
  EXPECT_EQ(r->bridges[2].acs.control.raw, 0);
  EXPECT_TRUE(r->any_redirect);
  EXPECT_FALSE(r->any_unreadable);
  // The note states what disabling ACS would cost.
  EXPECT_NE(r->security_note.find("could no longer be isolated"), std::string::npos);
}

TEST(PciAcs, PathAcrossSocketsIncludesRootPorts) {
  auto r = probe_acs_path("0000:03:00.0", "0000:81:00.0", fixture("baremetal_gds"));
  ASSERT_TRUE(r.ok());
  std::vector<std::string> bdfs;
  for (const auto& b : r->bridges) bdfs.push_back(b.bdf);
  EXPECT_EQ(bdfs, (std::vector<std::string>{"0000:02:00.0", "0000:01:00.0", "0000:00:01.0", "0000:80:01.0"}));
  EXPECT_EQ(r->bridges[3].acs.state, AcsState::unreadable);  // 64-byte config: not read as root
  EXPECT_TRUE(r->any_unreadable);
  EXPECT_NE(r->security_note.find("run as root"), std::string::npos);
}

TEST(PciAcs, NoBridgesBetweenRootBusDevicesOnTheVm) {
  auto r = probe_acs_path("0000:00:05.0", "0000:00:06.0", fixture("vm_no_udev_record"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->bridges.empty());
  EXPECT_FALSE(r->any_redirect);
  EXPECT_NE(r->security_note.find("ACS does not apply"), std::string::npos);
}

TEST(PciAcs, MissingDeviceIsNotFound) {
  auto r = probe_acs_path("0000:03:00.0", "0000:99:00.0", fixture("baremetal_gds"));
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::not_found));
}
