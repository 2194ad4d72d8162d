#include "platform/cufile/cufile_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <mutex>

#include "base/ascii.hpp"
#include "platform/probes/probe_fs.hpp"

namespace ferry::detail {

namespace {

constexpr std::uint64_t kMaxReadBytes = 64 * 1024;

constexpr const char* kLogName = "cufile.log";

// Ferry's own private directory and log, when Ferry chose them (not the user): removed at exit if empty.
std::string g_private_dir;
std::string g_private_log;

void remove_private_log_if_empty() {
  struct stat st {};
  if (::lstat(g_private_log.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
    (void)::unlink(g_private_log.c_str());
  (void)::rmdir(g_private_dir.c_str());  // fails, as it should, while a log with content is in it
}

// A directory only this user can enter, made by mkdtemp (mode 0700) under `base`: nobody else can plant a
// file or symlink where cuFile will write, and a leftover of an earlier process cannot be mistaken for this
// one's log. "" when it cannot be made.
std::string make_private_dir(const char* base) {
  if (base == nullptr || *base != '/') return {};
  std::string dir = std::string(base) + "/ferry-cufile-" + std::to_string(::getpid()) + "-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) return {};
  return dir;
}

std::string choose_log_path() {
  if (const char* set = std::getenv(kCuFileLogVariable)) return set;  // the user's choice, even ""
  // $XDG_RUNTIME_DIR is already private to the user; TMPDIR and /tmp are shared, the private directory
  // inside them is not.
  std::string dir = make_private_dir(std::getenv("XDG_RUNTIME_DIR"));
  if (dir.empty()) dir = make_private_dir(std::getenv("TMPDIR"));
  if (dir.empty()) dir = make_private_dir("/tmp");
  if (dir.empty()) return {};  // cuFile keeps its own default; Ferry has no log to quote
  std::string path = dir + "/" + kLogName;
  if (::setenv(kCuFileLogVariable, path.c_str(), /*overwrite=*/0) != 0) {
    (void)::rmdir(dir.c_str());
    return {};
  }
  g_private_dir = dir;
  g_private_log = path;
  std::atexit(remove_private_log_if_empty);
  return path;
}

// Opens the log for reading: never blocking on a FIFO, never following a symlink in Ferry's own
// directory, and only a regular file. -1 when there is nothing to read.
int open_log(const std::string& path) {
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (path == g_private_log ? O_NOFOLLOW : 0);
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads [from, end) of the file, at most the last kMaxReadBytes of it, split into lines.
std::vector<std::string> read_lines_from(const std::string& path, std::uint64_t from) {
  std::vector<std::string> lines;
  if (path.empty()) return lines;
  int fd = open_log(path);
  if (fd < 0) return lines;
  struct stat st {};
  (void)::fstat(fd, &st);
  auto end = static_cast<std::uint64_t>(std::max<off_t>(0, st.st_size));
  if (from > end) from = 0;  // the file was replaced or truncated: read it all
  bool partial_first = false;
  if (end - from > kMaxReadBytes) {
    from = end - kMaxReadBytes;
    partial_first = true;
  }
  std::string text(end - from, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::pread(fd, text.data() + got, text.size() - got, static_cast<off_t>(from + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  const std::vector<std::string_view> all = probes::split_lines(text);
  // A read that starts inside the file starts inside a line: that part of it is left out.
  const std::size_t first = partial_first && !all.empty() ? 1 : 0;
  lines.assign(all.begin() + static_cast<std::ptrdiff_t>(first), all.end());
  return lines;
}

bool contains_ignoring_case(std::string_view haystack, std::string_view needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != haystack.end();
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
  const std::string& path = prepare_cufile_log();
  if (path.empty()) return 0;
  int fd = open_log(path);
  if (fd < 0) return 0;
  struct stat st {};
  int rc = ::fstat(fd, &st);
  ::close(fd);
  return rc == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
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
  if (line) return std::string(trim_ascii(*line));
  return std::nullopt;
}

}  // namespace ferry::detail
