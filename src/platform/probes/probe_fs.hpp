// Reading the live system's pseudo files (procfs, sysfs, udev's database) under a chosen root, so that
// every doctor probe can be pointed at a fixture tree in tests. Nothing here writes.
// Thread safety: all functions are reentrant; they only read files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail::probes {

/// Maps a live-system absolute path ("/proc/modules") into `root` ("<root>/proc/modules"). With root
/// "/" this is the path itself. Relative inputs are treated as relative to the root as well.
std::filesystem::path under_root(const std::filesystem::path& root, std::string_view live_path);

/// Reads a small text or binary file whole (procfs/sysfs files report size 4096 or 0, so this reads
/// until EOF rather than trusting st_size). Errors: `not_found` when absent, `permission_denied`,
/// `io_error`; `out_of_range` past `max_bytes`. The Status path is the file read.
Result<std::string> read_file_bytes(const std::filesystem::path& file, std::size_t max_bytes = 1u << 20);

/// Like read_file_bytes, with trailing whitespace and newlines removed (sysfs values end in '\n').
Result<std::string> read_trimmed(const std::filesystem::path& file);

/// Resolves `live_path` inside `root` the way the kernel would if `root` were "/": follows symlinks one
/// component at a time, and treats absolute link targets as relative to `root`, so a fixture tree with
/// relative or absolute links never escapes into the host. Returns the resolved *live* path
/// ("/sys/devices/pci0000:00/..."). Errors: `not_found` when a component is missing (message names it),
/// `failed_precondition` on a symlink loop (more than 40 links).
Result<std::string> resolve_in_root(const std::filesystem::path& root, std::string_view live_path);

/// True when `name` looks like a PCI function address "dddd:bb:dd.f" (lower-case hex, as sysfs writes it).
bool is_pci_bdf(std::string_view name);

/// The lines of `text`, without their '\n'. A final '\n' ends the last line and starts no other: "a\n" is one
/// line, "" none.
std::vector<std::string_view> split_lines(std::string_view text);

/// Splits on any run of ASCII whitespace; no empty fields.
std::vector<std::string_view> split_ws(std::string_view s);

/// Parses an unsigned integer: decimal, or hex with a "0x" prefix. False on junk or overflow.
bool parse_u64(std::string_view s, std::uint64_t& out);

}  // namespace ferry::detail::probes
