#include "platform/cufile/cufile_log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

namespace ferry::detail {

namespace {

constexpr std::uint64_t kMaxReadBytes = 64 * 1024;

std::string choose_log_path() {
  if (const char* set = std::getenv(kCuFileLogVariable)) return set;  // the user's choice, even ""
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  std::string path = dir + "/ferry-cufile-" + std::to_string(::getpid()) + ".log";
  // A file left by an earlier process with the same pid would be quoted as this one's reasons.
  std::remove(path.c_str());
  ::setenv(kCuFileLogVariable, path.c_str(), /*overwrite=*/0);
  return path;
}

// Reads [from, end) of the file, at most the last kMaxReadBytes of it, split into lines.
std::vector<std::string> read_lines_from(const std::string& path, std::uint64_t from) {
  std::vector<std::string> lines;
  if (path.empty()) return lines;
  std::ifstream in(path, std::ios::binary);
  if (!in) return lines;
  in.seekg(0, std::ios::end);
  auto end = static_cast<std::uint64_t>(std::max<std::streamoff>(0, in.tellg()));
  if (from > end) from = 0;  // the file was replaced or truncated: read it all
  bool partial_first = false;
  if (end - from > kMaxReadBytes) {
    from = end - kMaxReadBytes;
    partial_first = true;
  }
  std::string text(end - from, '\0');
  in.seekg(static_cast<std::streamoff>(from));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(std::max<std::streamsize>(0, in.gcount())));
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t newline = text.find('\n', start);
    if (newline == std::string::npos) newline = text.size();
    if (!(partial_first && start == 0)) lines.emplace_back(text, start, newline - start);
    start = newline + 1;
  }
  return lines;
}

bool contains_ignoring_case(std::string_view haystack, std::string_view needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != haystack.end();
}

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

}  // namespace

const std::string& prepare_cufile_log() {
  static std::once_flag once;
  static std::string path;
  std::call_once(once, [] { path = choose_log_path(); });
  return path;
}

std::string cufile_log_path() { return prepare_cufile_log(); }

std::uint64_t cufile_log_size() {
  struct stat st {};
  const std::string& path = prepare_cufile_log();
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_size);
}

std::vector<std::string> cufile_log_tail(std::size_t n) {
  std::vector<std::string> lines = read_lines_from(prepare_cufile_log(), 0);
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(n));
  return lines;
}

std::vector<std::string> cufile_log_lines_since(std::uint64_t offset) {
  return read_lines_from(prepare_cufile_log(), offset);
}

std::optional<std::string> find_log_line(const std::vector<std::string>& lines,
                                         std::initializer_list<std::string_view> needles) {
  for (std::string_view needle : needles) {
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      if (contains_ignoring_case(*it, needle)) return *it;
    }
  }
  return std::nullopt;
}

std::optional<std::string> cufile_failure_reason(const std::vector<std::string>& lines) {
  std::optional<std::string> line = find_log_line(lines, {"udev", "error", "fail", "not supported"});
  if (line) return trim(*line);
  return std::nullopt;
}

}  // namespace ferry::detail
