// The cuFile configuration in effect: $CUFILE_ENV_PATH_JSON, else /etc/cufile.json. The file is JSON
// with // (and /* */) comments, which are blanked out before parsing so byte positions still match the
// file. Keys that are absent take cuFile's documented defaults and are flagged as defaults.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail::probes {

/// A setting's value and where it came from.
template <typename T>
struct CuFileSetting {
  T value{};
  bool is_default = true;  // true: not in the file (or wrong type): cuFile's documented default
  std::string key;         // "properties.allow_compat_mode"
};

struct CuFileConfig {
  std::string path;        // live path of the file in effect
  std::string path_source; // "CUFILE_ENV_PATH_JSON" or "default path"
  bool file_found = false;
  CuFileSetting<bool> allow_compat_mode;                       // fall back to cuFile's POSIX path
  CuFileSetting<bool> use_pci_p2pdma;                          // use PCI P2PDMA instead of nvidia-fs
  CuFileSetting<std::uint64_t> max_direct_io_size_kb;
  CuFileSetting<std::vector<std::uint64_t>> posix_pool_slab_size_kb;  // POSIX bounce-buffer pool
  CuFileSetting<std::vector<std::uint64_t>> posix_pool_slab_count;
  CuFileSetting<int> cufile_stats;                             // profile.cufile_stats, level 0..3
  CuFileSetting<std::string> logging_dir;                      // default: empty = current directory
  CuFileSetting<std::string> logging_level;
  std::vector<std::string> warnings;  // keys present with the wrong type (default used instead)
  std::vector<std::string> evidence;
};

/// cuFile's documented defaults (GDS configuration guide, parameter table; the slab defaults and
/// use_pci_p2pdma from the cufile.json template shipped with GDS). Note: that template itself sets
/// allow_compat_mode to true; the table's default is false.
CuFileConfig cufile_config_defaults();

/// Pure: replaces // and /* */ comments outside strings with spaces (newlines kept), so offsets into
/// the result are offsets into the input. Escaped quotes inside strings are honoured.
std::string strip_json_comments(std::string_view text);

/// Pure: parses cufile.json text. `path` names the file in messages. Errors: `invalid_argument` with
/// "<path>:<line>:<column>: <what>" for a syntax error, or when the top level is not an object.
Result<CuFileConfig> parse_cufile_config(std::string_view text, std::string_view path);

/// The file cuFile reads: `env_value` (the CUFILE_ENV_PATH_JSON value) when non-empty, else /etc/cufile.json.
std::string cufile_config_path(const char* env_value);

/// Reads the config in effect under `root`. `env_value` defaults to the process's CUFILE_ENV_PATH_JSON;
/// pass a value (or "") to override in tests. A missing file gives defaults with file_found=false.
/// Errors: parse errors as parse_cufile_config; unreadable file (`permission_denied`, `io_error`).
Result<CuFileConfig> probe_cufile_config(const std::filesystem::path& root = "/",
                                         std::optional<std::string> env_value = std::nullopt);

}  // namespace ferry::detail::probes
