// The nvidia-fs kernel driver that GPUDirect Storage's fast path (cuFile "nvfs") needs: is the module
// loaded, which version, and are its device nodes visible here (a container sees the host's
// /proc/modules but only the /dev nodes it was given).
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail::probes {

/// One /proc/modules line: "nvidia_fs 249856 0 - Live 0x0000000000000000 (OE)".
struct KernelModule {
  std::string name;
  std::uint64_t size_bytes = 0;
  int use_count = 0;
  std::string state;  // "Live", "Loading", "Unloading"
};

/// Pure: the entry for `name` in /proc/modules text, if any. Module names use '_' there even when the
/// module file uses '-', so "nvidia-fs" and "nvidia_fs" both match.
std::optional<KernelModule> find_kernel_module(std::string_view proc_modules, std::string_view name);

/// Pure: the version number in /proc/driver/nvidia-fs/version text ("version: 2.17.5" or "2.17.5"),
/// or std::nullopt when none is found.
std::optional<std::string> parse_nvidia_fs_version(std::string_view text);

struct NvidiaFsProbe {
  bool module_loaded = false;
  std::optional<KernelModule> module;
  bool proc_entry_present = false;         // /proc/driver/nvidia-fs exists
  std::optional<std::string> version;      // "2.17.5"
  std::vector<std::string> device_nodes;   // "/dev/nvidia-fs0", ... sorted by number
  /// Loaded, but no /dev/nvidia-fs* here: typical in a container not given the devices.
  bool loaded_but_nodes_missing() const { return module_loaded && device_nodes.empty(); }
  std::vector<std::string> evidence;
};

/// Reads `<root>/proc/modules`, `<root>/proc/driver/nvidia-fs/version` and lists `<root>/dev/nvidia-fs*`.
/// Absent files are states. Errors: only failures to read files that exist.
Result<NvidiaFsProbe> probe_nvidia_fs(const std::filesystem::path& root = "/");

}  // namespace ferry::detail::probes
