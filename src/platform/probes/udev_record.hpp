// udev's record of a block device (/run/udev/data/b<major>:<minor>). cuFile looks up ID_FS_USAGE there
// when registering a file handle; without it registration fails with error 5027 ("udev property not
// found"), which is the failure seen on our GPU VM. Containers usually lack /run/udev entirely unless it
// is bind-mounted (--volume /run/udev:/run/udev:ro).
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail::probes {

/// The four situations the doctor tells apart, best last.
enum class UdevRecordState {
  no_udev_dir,         // /run/udev does not exist: typical in containers
  no_record,           // /run/udev exists, no b<major>:<minor> file: cuFile registration fails (5027)
  missing_id_fs_usage, // record exists but has no E:ID_FS_USAGE: cuFile registration fails (5027)
  ok,                  // record with ID_FS_USAGE
};

/// "no_udev_dir", "no_record", "missing_id_fs_usage", "ok".
const char* udev_record_state_name(UdevRecordState s) noexcept;

/// Properties (E:KEY=VALUE lines) of a udev database record; other line kinds (S: links, I: init
/// time, G: tags, ...) are ignored. A later duplicate key wins.
std::map<std::string, std::string> parse_udev_properties(std::string_view record_text);

struct UdevProbe {
  UdevRecordState state = UdevRecordState::no_udev_dir;
  std::string record_path;  // live path looked at: "/run/udev/data/b252:0"
  std::map<std::string, std::string> properties;
  std::string id_fs_usage;  // "filesystem" when good; empty when absent
  std::string id_fs_type;   // "ext4", ...; empty when absent
  std::vector<std::string> evidence;
};

/// Looks up `<root>/run/udev/data/b<major>:<minor>`. "Not there" is a state, not an error.
/// Errors: reading a record that exists fails (`permission_denied`, `io_error`).
Result<UdevProbe> probe_udev_record(unsigned major, unsigned minor, const std::filesystem::path& root = "/");

}  // namespace ferry::detail::probes
