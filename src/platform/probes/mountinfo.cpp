// mountinfo parsing (format in proc(5)):
//   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//   (1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
#include "platform/probes/mountinfo.hpp"

#include <charconv>

#include <fmt/format.h>

#include "base/ascii.hpp"
#include "platform/probes/probe_fs.hpp"

namespace ferry::detail::probes {

std::string decode_mount_escapes(std::string_view f) {
  auto oct = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  out.reserve(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '\\' && i + 3 < f.size() && oct(f[i + 1]) && oct(f[i + 2]) && oct(f[i + 3])) {
      int v = (f[i + 1] - '0') * 64 + (f[i + 2] - '0') * 8 + (f[i + 3] - '0');
      if (v <= 0xff) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(f[i]);
  }
  return out;
}

static bool to_int(std::string_view s, int& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

static bool parse_dev(std::string_view s, unsigned& major, unsigned& minor) {
  auto colon = s.find(':');
  if (colon == std::string_view::npos) return false;
  auto a = s.substr(0, colon), b = s.substr(colon + 1);
  auto [p1, e1] = std::from_chars(a.data(), a.data() + a.size(), major);
  auto [p2, e2] = std::from_chars(b.data(), b.data() + b.size(), minor);
  return e1 == std::errc() && e2 == std::errc() && p1 == a.data() + a.size() && p2 == b.data() + b.size() &&
         !a.empty() && !b.empty();
}

static std::optional<MountEntry> parse_line(std::string_view line) {
  auto f = split_ws(line);
  // Fixed fields before the separator: 6, then optional fields, "-", then 3 (source may be absent on
  // some old kernels only when empty; we require 3).
  std::size_t sep = 0;
  for (std::size_t i = 6; i < f.size(); ++i)
    if (f[i] == "-") { sep = i; break; }
  if (sep == 0 || f.size() < sep + 3) return std::nullopt;
  MountEntry e;
  if (!to_int(f[0], e.mount_id) || !to_int(f[1], e.parent_id)) return std::nullopt;
  if (!parse_dev(f[2], e.major, e.minor)) return std::nullopt;
  e.root = decode_mount_escapes(f[3]);
  e.mount_point = decode_mount_escapes(f[4]);
  if (e.mount_point.empty() || e.mount_point.front() != '/') return std::nullopt;
  e.mount_options = std::string(f[5]);
  for (std::size_t i = 6; i < sep; ++i) e.optional_fields.emplace_back(f[i]);
  e.fs_type = decode_mount_escapes(f[sep + 1]);
  e.source = decode_mount_escapes(f[sep + 2]);
  if (f.size() > sep + 3) e.super_options = std::string(f[sep + 3]);
  return e;
}

MountTable parse_mountinfo(std::string_view text) {
  MountTable t;
  int lineno = 0;
  for (std::string_view line : split_lines(text)) {
    ++lineno;
    if (trim_ascii(line).empty()) continue;
    if (auto e = parse_line(line)) {
      t.entries.push_back(std::move(*e));
    } else {
      t.malformed_lines.push_back(fmt::format("line {}: {}", lineno, line));
    }
  }
  return t;
}

// Lexical normalisation: collapses "//", "." and ".."; keeps a leading "/".
static std::string normalise(std::string_view p) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i <= p.size()) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    auto c = p.substr(i, j - i);
    if (c == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!c.empty() && c != ".") {
      parts.push_back(c);
    }
    i = j + 1;
  }
  std::string s;
  for (auto c : parts) s += "/" + std::string(c);
  return s.empty() ? "/" : s;
}

const MountEntry* find_mount_for_path(const MountTable& table, std::string_view path) {
  std::string p = normalise(path);
  const MountEntry* best = nullptr;
  std::size_t best_len = 0;
  for (const auto& e : table.entries) {
    std::string mp = normalise(e.mount_point);
    bool holds = false;
    if (mp == "/") {
      holds = true;
    } else if (p.size() >= mp.size() && p.compare(0, mp.size(), mp) == 0) {
      holds = p.size() == mp.size() || p[mp.size()] == '/';  // component boundary
    }
    std::size_t len = mp == "/" ? 0 : mp.size();
    // ">=": a later entry at the same mount point is stacked on top of the earlier one.
    if (holds && (best == nullptr || len >= best_len)) {
      best = &e;
      best_len = len;
    }
  }
  return best;
}

Result<MountProbe> probe_mount_for_path(std::string_view path, const std::filesystem::path& root) {
  MountProbe probe;
  probe.mountinfo_path = "/proc/self/mountinfo";
  FERRY_ASSIGN_OR_RETURN(std::string text, read_file_bytes(under_root(root, probe.mountinfo_path), 16u << 20));
  MountTable t = parse_mountinfo(text);
  probe.entry_count = t.entries.size();
  probe.malformed_lines = t.malformed_lines;
  if (const MountEntry* e = find_mount_for_path(t, path)) {
    probe.mount = *e;
    probe.evidence.push_back(fmt::format(
        "{}: \"{}\" is on mount {} at \"{}\" ({} from {}, device {}:{}, root \"{}\", options {})",
        probe.mountinfo_path, path, e->mount_id, e->mount_point, e->fs_type, e->source, e->major, e->minor,
        e->root, e->mount_options));
  } else {
    probe.evidence.push_back(
        fmt::format("{}: no mount holds \"{}\" ({} entries)", probe.mountinfo_path, path, t.entries.size()));
  }
  for (const auto& m : t.malformed_lines)
    probe.evidence.push_back(fmt::format("{}: skipped malformed {}", probe.mountinfo_path, m));
  return probe;
}

}  // namespace ferry::detail::probes
