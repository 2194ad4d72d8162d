// udev database records: one "X:payload" per line; we need the E: (property) lines.
#include "platform/probes/udev_record.hpp"

#include <system_error>

#include <fmt/format.h>

#include "platform/probes/probe_fs.hpp"

namespace ferry::detail::probes {

const char* udev_record_state_name(UdevRecordState s) noexcept {
  switch (s) {
    case UdevRecordState::no_udev_dir: return "no_udev_dir";
    case UdevRecordState::no_record: return "no_record";
    case UdevRecordState::missing_id_fs_usage: return "missing_id_fs_usage";
    case UdevRecordState::ok: return "ok";
  }
  return "unknown";
}

std::map<std::string, std::string> parse_udev_properties(std::string_view text) {
  std::map<std::string, std::string> props;
  for (std::string_view line : split_lines(text)) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() < 3 || line.substr(0, 2) != "E:") continue;
    line.remove_prefix(2);
    std::size_t eq = line.find('=');
    if (eq == 0 || eq == std::string_view::npos) continue;  // "E:=x" or "E:KEY": not a property
    props[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  return props;
}

Result<UdevProbe> probe_udev_record(unsigned major, unsigned minor, const std::filesystem::path& root) {
  UdevProbe p;
  p.record_path = fmt::format("/run/udev/data/b{}:{}", major, minor);
  std::error_code ec;
  if (!std::filesystem::is_directory(under_root(root, "/run/udev"), ec)) {
    p.state = UdevRecordState::no_udev_dir;
    p.evidence.push_back(
        "/run/udev: absent (typical in a container started without --volume /run/udev:/run/udev:ro); "
        "cuFile cannot look up ID_FS_USAGE");
    return p;
  }
  auto file = under_root(root, p.record_path);
  if (!std::filesystem::exists(file, ec)) {
    p.state = UdevRecordState::no_record;
    p.evidence.push_back(fmt::format("{}: absent although /run/udev exists; cuFile handle registration "
                                     "fails with 5027 (udev property not found: ID_FS_USAGE)",
                                     p.record_path));
    return p;
  }
  FERRY_ASSIGN_OR_RETURN(std::string text, read_file_bytes(file));
  p.properties = parse_udev_properties(text);
  if (auto it = p.properties.find("ID_FS_TYPE"); it != p.properties.end()) p.id_fs_type = it->second;
  auto usage = p.properties.find("ID_FS_USAGE");
  if (usage == p.properties.end() || usage->second.empty()) {
    p.state = UdevRecordState::missing_id_fs_usage;
    p.evidence.push_back(fmt::format("{}: present ({} properties) but has no E:ID_FS_USAGE; cuFile handle "
                                     "registration fails with 5027",
                                     p.record_path, p.properties.size()));
  } else {
    p.state = UdevRecordState::ok;
    p.id_fs_usage = usage->second;
    p.evidence.push_back(fmt::format("{}: ID_FS_USAGE={} ID_FS_TYPE={}", p.record_path, p.id_fs_usage,
                                     p.id_fs_type.empty() ? "(absent)" : p.id_fs_type));
  }
  return p;
}

}  // namespace ferry::detail::probes
