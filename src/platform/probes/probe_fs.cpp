// Root-relative reading and symlink resolution for the doctor probes.
#include "platform/probes/probe_fs.hpp"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <deque>
#include <system_error>

#include <fmt/format.h>

#include "base/ascii.hpp"

namespace ferry::detail::probes {

namespace fs = std::filesystem;

fs::path under_root(const fs::path& root, std::string_view live_path) {
  std::string_view rel = live_path;
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  if (rel.empty()) return root;
  return root / fs::path(std::string(rel));
}

Result<std::string> read_file_bytes(const fs::path& file, std::size_t max_bytes) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr) {
    int e = errno;
    return Status::from_errno(e, fmt::format("Could not open \"{}\"", file.string()), file.string());
  }
  std::string out;
  char buf[4096];
  for (;;) {
    std::size_t n = std::fread(buf, 1, sizeof buf, f);
    out.append(buf, n);
    if (out.size() > max_bytes) {
      std::fclose(f);
      return Status(ErrorCode::out_of_range,
                    fmt::format("\"{}\" is larger than {} bytes", file.string(), max_bytes), 0, file.string());
    }
    if (n < sizeof buf) {
      if (std::ferror(f)) {
        int e = errno;
        std::fclose(f);
        return Status::from_errno(e, fmt::format("Could not read \"{}\"", file.string()), file.string());
      }
      break;
    }
  }
  std::fclose(f);
  return out;
}

Result<std::string> read_trimmed(const fs::path& file) {
  FERRY_ASSIGN_OR_RETURN(std::string text, read_file_bytes(file));
  return std::string(trim_ascii(text));
}

static std::vector<std::string> split_path(std::string_view p) {
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i < p.size()) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    if (j > i) parts.emplace_back(p.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

static std::string join_live(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += "/" + p;
  return s.empty() ? "/" : s;
}

Result<std::string> resolve_in_root(const fs::path& root, std::string_view live_path) {
  std::deque<std::string> todo;
  for (auto& p : split_path(live_path)) todo.push_back(std::move(p));
  std::vector<std::string> done;
  int links = 0;
  while (!todo.empty()) {
    std::string comp = std::move(todo.front());
    todo.pop_front();
    if (comp == ".") continue;
    if (comp == "..") {
      if (!done.empty()) done.pop_back();  // ".." at "/" stays at "/", as in the kernel
      continue;
    }
    done.push_back(comp);
    std::string live = join_live(done);
    std::error_code ec;
    fs::file_status st = fs::symlink_status(under_root(root, live), ec);
    if (ec || !fs::exists(st)) {
      return Status(ErrorCode::not_found, fmt::format("\"{}\" does not exist (resolving \"{}\")", live, live_path),
                    ENOENT, under_root(root, live).string());
    }
    if (!fs::is_symlink(st)) continue;
    if (++links > 40) {
      return Status(ErrorCode::failed_precondition,
                    fmt::format("Too many symbolic links resolving \"{}\"", live_path), ELOOP);
    }
    fs::path target = fs::read_symlink(under_root(root, live), ec);
    if (ec) return Status::from_errno(ec.value(), fmt::format("Could not read link \"{}\"", live), live);
    done.pop_back();
    std::string t = target.string();
    if (!t.empty() && t.front() == '/') done.clear();  // absolute target: relative to root
    auto parts = split_path(t);
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_front(*it);
  }
  return join_live(done);
}

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool is_pci_bdf(std::string_view n) {
  // dddd:bb:dd.f
  if (n.size() != 12) return false;
  for (std::size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u})
    if (!is_hex(n[i])) return false;
  return n[4] == ':' && n[7] == ':' && n[10] == '.' && n[11] >= '0' && n[11] <= '7';
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  const char* ws = " \t\r\n\v\f";
  while (i < s.size()) {
    std::size_t b = s.find_first_not_of(ws, i);
    if (b == std::string_view::npos) break;
    std::size_t e = s.find_first_of(ws, b);
    if (e == std::string_view::npos) e = s.size();
    out.push_back(s.substr(b, e - b));
    i = e;
  }
  return out;
}

bool parse_u64(std::string_view s, std::uint64_t& out) {
  s = trim_ascii(s);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace ferry::detail::probes
