// Creating or replacing a file safely: see file/output_file.hpp for the rules.
#include "file/output_file.hpp"

#include <fcntl.h>
#include <dirent.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "file/open_options.hpp"
#include "source/transfer_loops.hpp"

namespace ferry::detail {
namespace {

// ---- the signal handlers' one slot: the temporary name to remove, if any ----
// One temporary holds it at a time (the CLI writes one file); one made meanwhile (saves on several threads)
// goes without: if a signal leaves it, the next save into its directory removes it. The holder writes the
// name while the slot is not armed; remove_named_temporary, which a signal handler may call, reads it once
// armed (a lock-free atomic: async-signal-safe).
enum SlotState : int { kFree, kWriting, kArmed };
std::atomic<int> g_slot{kFree};
int g_armed_dir = -1;
char g_armed_name[64] = {};

// Arms the slot with `name` in `dir` if it is free; returns whether this temporary holds it.
bool arm(int dir, const std::string& name) {
  int free = kFree;
  if (!g_slot.compare_exchange_strong(free, kWriting)) return false;
  g_armed_dir = dir;
  std::snprintf(g_armed_name, sizeof g_armed_name, "%s", name.c_str());
  g_slot.store(kArmed, std::memory_order_release);
  return true;
}

// Frees the slot if `held` says this temporary holds it.
void disarm(bool& held) {
  if (std::exchange(held, false)) g_slot.store(kFree, std::memory_order_release);
}

// ---- names and messages ----

// This machine, as 8 hex digits of a hash of its host name: temporaries of another machine sharing the
// directory (NFS) are never taken for a dead process's.
std::string host_tag() {
  char host[256] = {};
  (void)::gethostname(host, sizeof host - 1);
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const char* c = host; *c != '\0'; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 16777619u;
  return fmt::format("{:08x}", h);
}

// ".ferry-<pid>-<host tag>-<8 random characters>": a temporary's name says which process on which machine
// writes it, so that the next save into the directory can remove those of processes that are gone.
std::string random_name() {
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[8];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got < sizeof bytes) {  // no getrandom: still unpredictable enough to avoid collisions, with O_EXCL
    std::uint64_t x = static_cast<std::uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull ^
                      reinterpret_cast<std::uintptr_t>(&got) ^ static_cast<std::uint64_t>(::clock());
    for (auto& b : bytes) b = static_cast<unsigned char>(x >>= 5);
  }
  std::string name = fmt::format("{}{}-{}-", kTemporaryPrefix, ::getpid(), host_tag());
  for (unsigned char b : bytes) name += kAlphabet[b % (sizeof kAlphabet - 1)];
  return name;
}

// The pid in a temporary's name written on this machine, or 0 for any other name.
pid_t writer_of(const char* name, const std::string& host) {
  const std::size_t prefix = std::strlen(kTemporaryPrefix);
  if (std::strncmp(name, kTemporaryPrefix, prefix) != 0) return 0;
  char* end = nullptr;
  const long pid = std::strtol(name + prefix, &end, 10);
  if (pid <= 0 || end == name + prefix || *end != '-') return 0;
  if (std::strncmp(end + 1, host.c_str(), host.size()) != 0 || end[1 + host.size()] != '-') return 0;
  return static_cast<pid_t>(pid);
}

// `path` with NUL bytes shown as \0, for a message.
std::string printable_path(const std::string& path) {
  std::string out;
  for (char c : path) out += c == '\0' ? std::string("\\0") : std::string(1, c);
  return out;
}

// What a file that is neither regular nor a directory is (a symlink's target is described, never the link).
const char* file_type_name(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// `path` refused as a destination, for `why`.
Status refusal(ErrorCode code, const std::string& path, const std::string& why) {
  return Status(code, fmt::format("Could not write \"{}\": {}", path, why), 0, path);
}

Status write_error(int e, const std::string& path, const std::string& detail = {}) {
  return Status::from_errno(e, fmt::format("Could not write \"{}\"{}", path, detail.empty() ? "" : ": " + detail),
                            path);
}

// `path`'s directory and last component.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// The process's umask from /proc/self/status (Linux 4.7 and later; else the usual 022): umask() reads it only by
// setting it, and files other threads created meanwhile got no umask (the reliability review of 2026-12-04).
mode_t current_umask() {
  UniqueFd status(::open("/proc/self/status", O_RDONLY | O_CLOEXEC));
  char text[4096];
  ssize_t n = status.get() >= 0 ? ::read(status.get(), text, sizeof(text) - 1) : -1;
  if (n > 0) {
    text[n] = '\0';
    if (const char* line = std::strstr(text, "\nUmask:")) return static_cast<mode_t>(std::strtoul(line + 7, nullptr, 8));
  }
  return 022;
}

// Follows the symlink at `path` through the kernel (which applies its own protections), or explains why not.
Status follow_symlink(OutputDestination& d, const struct stat& link) {
  struct stat dir {};
  const std::string link_dir = split_path(d.path).first;
  if (::stat(link_dir.c_str(), &dir) == 0 && (dir.st_mode & S_ISVTX) && (dir.st_mode & S_IWOTH) &&
      link.st_uid != ::geteuid() && link.st_uid != dir.st_uid) {
    return refusal(ErrorCode::permission_denied, d.path,
                   fmt::format("it is a symbolic link owned by another user (uid {}) in a sticky, world-writable "
                               "directory, and such a link is not followed (as fs.protected_symlinks would refuse it)",
                               link.st_uid));
  }
  UniqueFd target(::open(d.path.c_str(), O_PATH | O_CLOEXEC));
  if (target.get() < 0) {
    int e = errno;
    if (e == ENOENT) {
      std::string to(4096, '\0');
      ssize_t n = ::readlink(d.path.c_str(), to.data(), to.size());
      to.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
      return refusal(ErrorCode::not_found, d.path,
                     fmt::format("it is a symbolic link to \"{}\", which does not exist (Ferry does not create the "
                                 "target of a dangling link)",
                                 to));
    }
    return write_error(e, d.path, "following its symbolic link");
  }
  if (::fstat(target.get(), &d.st) != 0) return write_error(errno, d.path, "following its symbolic link");
  std::string resolved(4096, '\0');
  ssize_t n = ::readlink(fmt::format("/proc/self/fd/{}", target.get()).c_str(), resolved.data(), resolved.size());
  if (n <= 0 || static_cast<std::size_t>(n) >= resolved.size() || resolved[0] != '/')
    return write_error(n < 0 ? errno : ENOENT, d.path, "finding where its symbolic link leads (/proc/self/fd)");
  resolved.resize(static_cast<std::size_t>(n));
  d.target = resolved;
  d.through_symlink = true;
  return Status();
}

// One look at `path` (inspect_destination); `replaced` is set when the file changed between the look at its
// name and the check of the file itself (another writer's rename landed in between).
Result<OutputDestination> inspect_once(const std::string& path, bool* replaced) {
  OutputDestination d;
  d.path = path;
  d.target = path;
  if (path.empty()) return refusal(ErrorCode::invalid_argument, path, "the file name is empty");
  // A NUL ends the path the kernel sees: "model\0.bak" would replace "model".
  if (path.find('\0') != std::string::npos) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("Could not write \"{}\": the name holds a NUL byte", printable_path(path)), EINVAL);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      FERRY_RETURN_IF_ERROR(follow_symlink(d, st));
    } else {
      d.st = st;
    }
    if (S_ISDIR(d.st.st_mode)) return refusal(ErrorCode::is_a_directory, path, "it is a directory");
    if (!S_ISREG(d.st.st_mode)) {
      return refusal(ErrorCode::failed_precondition, path,
                     fmt::format("{} {}, not a regular file; Ferry creates or replaces regular files only, and never "
                                 "replaces a device, FIFO or socket",
                                 d.through_symlink ? "it leads to" : "it is", file_type_name(d.st.st_mode)));
    }
    d.exists = true;
  } else if (errno != ENOENT) {
    return write_error(errno, path);
  } else if (path.back() == '/') {
    return refusal(ErrorCode::is_a_directory, path, "a name ending in \"/\" is a directory");
  }

  std::tie(d.directory, d.name) = split_path(d.target);
  if (d.name.empty() || d.name == "." || d.name == "..") {
    return refusal(ErrorCode::is_a_directory, path, "it is a directory");
  }
  d.dir = UniqueFd(::open(d.directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (d.dir.get() < 0) return write_error(errno, path);

  if (d.exists) {
    // Would `>` be allowed to write it? Opening for writing without truncating changes nothing and asks the
    // kernel exactly that (permissions, read-only mounts, immutable files, running executables).
    UniqueFd probe(::openat(d.dir.get(), d.name.c_str(), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
    if (probe.get() < 0) return write_error(errno, path);
    struct stat now {};
    if (::fstat(probe.get(), &now) != 0) return write_error(errno, path);
    if (now.st_dev != d.st.st_dev || now.st_ino != d.st.st_ino || !S_ISREG(now.st_mode)) {
      *replaced = true;
      return refusal(ErrorCode::failed_precondition, path, "it was replaced while being checked, again and again");
    }
    d.st = now;
    // In a sticky directory only the file's owner (or the directory's, or root) may replace it.
    struct stat dir {};
    if (::fstat(d.dir.get(), &dir) == 0 && (dir.st_mode & S_ISVTX) && ::geteuid() != 0 &&
        d.st.st_uid != ::geteuid() && dir.st_uid != ::geteuid()) {
      return refusal(ErrorCode::permission_denied, path,
                     fmt::format("it belongs to another user (uid {}) in a sticky directory, where only its owner "
                                 "may replace it",
                                 d.st.st_uid));
    }
  }
  return d;
}

// Removes the temporaries in `dir` of this machine's processes that no longer exist; returns their names.
std::vector<std::string> remove_stale_temporaries(int dir) {
  std::vector<std::string> removed;
  UniqueFd opened(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::unique_ptr<DIR, int (*)(DIR*)> entries(opened.valid() ? ::fdopendir(opened.get()) : nullptr, &::closedir);
  if (!entries) return removed;
  const int listing = opened.release();  // closed with `entries`
  const std::string host = host_tag();
  while (const struct dirent* e = ::readdir(entries.get())) {
    const pid_t writer = writer_of(e->d_name, host);
    if (writer == 0 || writer == ::getpid()) continue;
    if (::kill(writer, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask about: kept
    struct stat st {};
    if (::fstatat(listing, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::unlinkat(listing, e->d_name, 0) == 0) removed.emplace_back(e->d_name);
  }
  return removed;
}

// Gives a new file a hidden name of its own in `dir`: `make(name)` makes it under that name and returns 0 or an
// errno (EEXIST: another name is tried). The name is armed for the signal handlers (`armed`: whether it holds the
// slot) before the file exists, so that a signal right after it is made still removes it. Errors name `path`.
template <typename Make>
Result<std::string> name_new_file(int dir, Make&& make, const std::string& path, const std::string& doing,
                                  bool& armed) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string name = random_name();
    armed = arm(dir, name);
    const int e = make(name);
    if (e == 0) return name;
    disarm(armed);
    if (e != EEXIST) return write_error(e, path, doing);
  }
  return write_error(EEXIST, path, doing);
}

}  // namespace

Result<OutputDestination> inspect_destination(const std::string& path) {
  // A save replaces the name anyway: another save's rename landing during the checks is no reason to fail
  // (two processes saving one path: one failed now and then with "it was replaced while being checked", the
  // reliability review of 2026-12-04). Look again; the last writer wins.
  constexpr int kLooks = 16;
  for (int look = 1;; ++look) {
    bool replaced = false;
    auto d = inspect_once(path, &replaced);
    if (!replaced || look == kLooks) return d;
  }
}

Result<TempFile> TempFile::create(const OutputDestination& d) {
  TempFile t;
  t.dir_ = UniqueFd(::fcntl(d.dir.get(), F_DUPFD_CLOEXEC, 0));
  if (t.dir_.get() < 0) return write_error(errno, d.path);
  t.removed_stale_ = remove_stale_temporaries(t.dir_.get());
  const std::string in_dir = fmt::format("creating a file in \"{}\"", d.directory);
  // An unnamed file first: nothing to plant, nothing to clean up. Tests can force the named way.
  const char* no_tmpfile = std::getenv("FERRY_CLI_TEST_NO_O_TMPFILE");
  if (no_tmpfile == nullptr || *no_tmpfile == '\0') {
    t.fd_ = UniqueFd(::openat(t.dir_.get(), ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (t.fd_.valid()) return t;
    // File systems without O_TMPFILE say so in several ways; anything else is a real refusal.
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT)
      return write_error(errno, d.path, in_dir);
  }
  auto create_named = [&](const std::string& name) {
    const int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    t.fd_ = UniqueFd(::openat(t.dir_.get(), name.c_str(), flags, 0600));
    return t.fd_.valid() ? 0 : errno;
  };
  FERRY_ASSIGN_OR_RETURN(t.name_, name_new_file(t.dir_.get(), create_named, d.path, in_dir, t.armed_));
  return t;
}

TempFile::TempFile(TempFile&& o) noexcept
    : fd_(std::move(o.fd_)),
      dir_(std::move(o.dir_)),
      name_(std::exchange(o.name_, {})),
      armed_(std::exchange(o.armed_, false)),  // the slot names the same descriptor number, which moved along
      removed_stale_(std::move(o.removed_stale_)) {}

TempFile::~TempFile() {
  if (name_.empty()) return;  // unnamed, committed, or moved from
  (void)::unlinkat(dir_.get(), name_.c_str(), 0);
  disarm(armed_);
}

std::string TempFile::reopen_path() const { return fmt::format("/proc/self/fd/{}", fd_.get()); }

Result<File> TempFile::open_file(const OutputDestination& d, const Config& config, const OpenOptions* seams) const {
  OpenOptions options = seams ? *seams : OpenOptions{};
  // Opened through /proc/self/fd (the one path an unnamed file has), but named after the destination, so
  // that every message and report speaks of the file the caller asked for.
  options.name = d.path;
  return detail::open_file(reopen_path(), "r+", config, options);
}

Status TempFile::commit(const OutputDestination& d, bool replace, bool sync_directory) {
  // What `>` would have kept: the mode, and the owner and group where the caller may set them.
  mode_t mode = 0666 & ~current_umask();
  if (d.exists) {
    if (d.st.st_uid != ::geteuid() || d.st.st_gid != ::getegid()) {
      if (::fchown(fd_.get(), d.st.st_uid, d.st.st_gid) != 0) (void)::fchown(fd_.get(), static_cast<uid_t>(-1), d.st.st_gid);
    }
    mode = d.st.st_mode & 07777;  // after fchown, which clears set-user-ID and set-group-ID bits
  }
  if (::fchmod(fd_.get(), mode) != 0) return write_error(errno, d.path, fmt::format("setting its mode {:o}", mode));

  const std::string naming = fmt::format("naming the new file in \"{}\"", d.directory);
  // Give the file a name of its own first where it has none (linkat from /proc/self/fd needs no privilege;
  // AT_EMPTY_PATH is the fallback without /proc), then move it over the target in one step.
  auto link_to = [&](const std::string& to) -> int {
    if (::linkat(AT_FDCWD, reopen_path().c_str(), dir_.get(), to.c_str(), AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno != ENOENT) return errno;
    return ::linkat(fd_.get(), "", dir_.get(), to.c_str(), AT_EMPTY_PATH) == 0 ? 0 : errno;
  };
  if (!replace) {
    int e = name_.empty() ? link_to(d.name)
                          : (::linkat(dir_.get(), name_.c_str(), dir_.get(), d.name.c_str(), 0) == 0 ? 0 : errno);
    if (e == EEXIST)
      return Status(ErrorCode::already_exists,
                    fmt::format("Could not create \"{}\": a file of that name appeared meanwhile; it was left alone",
                                d.path),
                    0, d.path);
    if (e != 0) return write_error(e, d.path, naming);
  } else {
    if (name_.empty()) {
      FERRY_ASSIGN_OR_RETURN(name_, name_new_file(dir_.get(), link_to, d.path, naming, armed_));
    }
    if (::renameat(dir_.get(), name_.c_str(), dir_.get(), d.name.c_str()) != 0)
      return write_error(errno, d.path, fmt::format("renaming the new file over it in \"{}\"", d.directory));
  }
  if (!name_.empty() && !replace) (void)::unlinkat(dir_.get(), name_.c_str(), 0);
  disarm(armed_);
  name_.clear();
  if (sync_directory) {
    UniqueFd dir(::openat(dir_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() >= 0 && ::fsync(dir.get()) != 0 && errno != EINVAL)
      return write_error(errno, d.path, fmt::format("syncing its directory \"{}\"", d.directory));
  }
  return Status();
}

Status replace_file_contents(const std::string& path, std::string_view bytes, bool durable) {
  FERRY_ASSIGN_OR_RETURN(OutputDestination d, inspect_destination(path));
  FERRY_ASSIGN_OR_RETURN(TempFile temp, TempFile::create(d));
  IoCounters io;
  if (LoopOutcome w = write_fully(real_syscalls(), temp.fd(), bytes.data(), bytes.size(), 0, io); w.error != 0) {
    return write_error(w.error, path);
  }
  if (durable && ::fdatasync(temp.fd()) != 0) return write_error(errno, path, "syncing it to its device");
  return temp.commit(d, /*replace=*/true, durable);
}

void remove_named_temporary() noexcept {
  const int saved = errno;
  int armed = kArmed;
  if (g_slot.compare_exchange_strong(armed, kWriting)) {
    (void)::unlinkat(g_armed_dir, g_armed_name, 0);
    g_slot.store(kFree);
  }
  errno = saved;
}

}  // namespace ferry::detail
