// Which mount holds a file: /proc/self/mountinfo parsed, and the mount containing a path found by the
// longest mount-point prefix (the kernel's view from this process's mount namespace).
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail::probes {

/// One line of mountinfo (proc(5)); strings are already decoded (\040 -> ' ').
struct MountEntry {
  int mount_id = 0;
  int parent_id = 0;
  unsigned major = 0;  // st_dev of files on this mount; for a block file system, the block device
  unsigned minor = 0;
  std::string root;         // subtree of the file system mounted here: "/" normally, a directory for bind mounts
  std::string mount_point;  // as seen by this process
  std::string mount_options;                // per-mount: "rw,relatime"
  std::vector<std::string> optional_fields; // "shared:1", "master:2", ...
  std::string fs_type;                      // "ext4", "xfs", "overlay", "fuse.sshfs"
  std::string source;                       // "/dev/vda", "overlay", "tmpfs"
  std::string super_options;                // per-superblock: "rw,errors=remount-ro"

  /// A bind mount of a subdirectory shows a root other than "/". (A bind of a whole file system
  /// cannot be told from its original mount in mountinfo.)
  bool is_subtree_bind() const { return root != "/"; }
};

struct MountTable {
  std::vector<MountEntry> entries;
  /// Lines that did not parse, verbatim with their 1-based line numbers: "line 7: <text>".
  std::vector<std::string> malformed_lines;
};

/// Decodes mountinfo's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash). A backslash
/// not followed by three octal digits is kept as is.
std::string decode_mount_escapes(std::string_view field);

/// Parses mountinfo text. Malformed lines are collected, not fatal; never fails.
MountTable parse_mountinfo(std::string_view text);

/// The entry whose mount point is the longest prefix of `path` on a component boundary ("/data"
/// holds "/data/x" but not "/database"). Of entries with the same mount point, the last wins (it is
/// mounted on top). `path` must be absolute and should be canonical (symlinks resolved) — this
/// function only normalises it lexically. nullptr when nothing matches (no "/" entry).
const MountEntry* find_mount_for_path(const MountTable& table, std::string_view path);

struct MountProbe {
  std::string mountinfo_path;     // the file read, e.g. "/proc/self/mountinfo"
  std::optional<MountEntry> mount;  // empty when no entry holds the path
  std::size_t entry_count = 0;
  std::vector<std::string> malformed_lines;
  std::vector<std::string> evidence;  // "/proc/self/mountinfo line: 29 1 252:0 / / rw ... - ext4 /dev/vda rw"
};

/// Reads `<root>/proc/self/mountinfo` and finds the mount holding `path` (a live-system path).
/// Errors: those of reading the file (`not_found` when procfs is not mounted).
Result<MountProbe> probe_mount_for_path(std::string_view path, const std::filesystem::path& root = "/");

}  // namespace ferry::detail::probes
