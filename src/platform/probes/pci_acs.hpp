// PCI Express Access Control Services (extended capability 0x000D) read from config space
// (/sys/bus/pci/devices/<bdf>/config). Unprivileged readers get only the first 64 bytes; the extended
// capabilities start at 0x100, so ACS is visible only to root.
// With ACS P2P Request/Completion Redirect on, a switch port sends peer-to-peer traffic up to the root
// complex (where the IOMMU can check it) instead of straight across the switch: safer, slower for
// GPUDirect. Turning it off lets devices below the switch reach each other unchecked, and the kernel
// then puts them in one IOMMU group (they can no longer be given to different VMs).
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail::probes {

inline constexpr std::uint16_t kPciExtCapIdAcs = 0x000D;
inline constexpr std::size_t kPciExtCapStart = 0x100;

/// The ACS bits, shared by the capability register (what the port supports) and the control register
/// (what is enabled). Bit positions per the PCIe base specification.
struct AcsFlags {
  std::uint16_t raw = 0;
  bool source_validation() const { return raw & 0x01; }        // SV
  bool translation_blocking() const { return raw & 0x02; }     // TB
  bool p2p_request_redirect() const { return raw & 0x04; }     // RR
  bool p2p_completion_redirect() const { return raw & 0x08; }  // CR
  bool upstream_forwarding() const { return raw & 0x10; }      // UF
  bool p2p_egress_control() const { return raw & 0x20; }       // EC
  bool direct_translated_p2p() const { return raw & 0x40; }    // DT
  /// "SV RR CR UF" style list of set bits; "none" when raw == 0.
  std::string to_string() const;
};

enum class AcsState {
  present,            // ACS capability found; see capability/control
  absent,             // extended capability list walked, no ACS (e.g. a switch upstream port, a VM's device)
  no_extended_space,  // config has 256 bytes or fewer: conventional PCI, or extended space not exposed
  unreadable,         // only the first 64 bytes readable (not root), or the config file is missing
};

struct AcsCapability {
  AcsState state = AcsState::unreadable;
  std::uint16_t offset = 0;  // config-space offset of the ACS header when present
  AcsFlags capability;       // supported
  AcsFlags control;          // enabled
  /// Redirect (RR or CR) enabled: peer-to-peer through this port goes via the root complex.
  bool redirects_p2p() const {
    return state == AcsState::present && (control.p2p_request_redirect() || control.p2p_completion_redirect());
  }
};

/// Pure: walks the extended capability list of a config-space image. A malformed list (pointer below
/// 0x100, past the end, or a loop) stops the walk; the result is then `absent`, never a crash.
AcsCapability parse_acs_capability(std::span<const std::uint8_t> config);

struct BridgeAcs {
  std::string bdf;
  AcsCapability acs;
  std::string evidence;  // "/sys/bus/pci/devices/0000:02:00.0/config: ACS at 0x148, cap SV RR CR UF, ctl SV RR CR UF"
};

struct AcsPathProbe {
  std::string device_bdf;
  std::string gpu_bdf;
  std::vector<BridgeAcs> bridges;  // bridges a peer-to-peer transfer passes, from the device side up, then down
  bool any_redirect = false;       // some bridge redirects P2P to the root complex
  bool any_unreadable = false;     // some bridge's config was not readable far enough (run as root)
  std::string security_note;
  std::vector<std::string> evidence;
};

/// Reads the ACS capability of one function: `<root>/sys/bus/pci/devices/<bdf>/config`.
/// A missing or short file is a state (`unreadable`), not an error.
BridgeAcs probe_acs(std::string_view bdf, const std::filesystem::path& root = "/");

/// ACS of every bridge between `device_bdf` and `gpu_bdf`: below their lowest common bridge (inclusive)
/// on both sides, or all bridges on both chains when they are on different host bridges.
/// Errors: `not_found` when either device is missing from sysfs.
Result<AcsPathProbe> probe_acs_path(std::string_view device_bdf, std::string_view gpu_bdf,
                                    const std::filesystem::path& root = "/");

}  // namespace ferry::detail::probes
