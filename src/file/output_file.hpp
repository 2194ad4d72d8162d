// Creating or replacing a file safely: the one copy of the rules (docs/safetensors.md, "Saving") that
// ferry::safetensors::save, `ferry write` and `ferry-bench` share. The new data goes into an unnamed O_TMPFILE
// file, else one created O_EXCL|O_NOFOLLOW under a hidden name saying who writes it (kTemporaryPrefix, pid,
// host tag), and replaces the destination once complete; only regular files are created or replaced, and a
// symlink is written through as `>` does. FERRY_CLI_TEST_NO_O_TMPFILE=1 forces the named way, for tests.
// Thread safety: one OutputDestination/TempFile per thread; the signal handlers are process-wide.
#pragma once

#include <sys/stat.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.hpp"
#include "ferry/config.hpp"
#include "ferry/file.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

struct OpenOptions;

/// What a command will create or replace, learned without changing anything.
struct OutputDestination {
  std::string path;       // as the user gave it: every message names this
  std::string target;     // the file created or replaced: `path`, or the file its symlink leads to
  std::string directory;  // the target's directory
  std::string name;       // the target's last component
  bool exists = false;    // the target is an existing regular file (its stat in `st`)
  bool through_symlink = false;
  struct stat st {};
  UniqueFd dir;           // the directory, opened O_PATH: the temporary file and the rename happen there
};

/// Checks `path` as a destination (rules above). Errors, each naming `path`: is_a_directory;
/// failed_precondition for a device, FIFO or socket; not_found for a missing directory or a symlink to
/// nothing; permission_denied when an existing file may not be written, when the symlink may not be
/// followed, or when the file belongs to another user in a sticky directory (rename would fail at the end).
[[nodiscard]] Result<OutputDestination> inspect_destination(const std::string& path);

/// A new, private file in the destination's directory (rules above). Removed unless committed.
class TempFile {
 public:
  /// Errors name the destination's path: permission_denied, no_space, ... for its directory. First removes
  /// the directory's temporaries of this machine's processes that are gone.
  [[nodiscard]] static Result<TempFile> create(const OutputDestination& d);
  /// The names create() removed as a dead process's temporaries (for a note).
  const std::vector<std::string>& removed_stale() const { return removed_stale_; }
  TempFile(TempFile&& o) noexcept;
  TempFile& operator=(TempFile&&) = delete;
  ~TempFile();

  int fd() const { return fd_.get(); }
  /// A path that opens this very file ("/proc/self/fd/N").
  std::string reopen_path() const;
  /// This file opened as a ferry::File ("r+") whose messages and reports name `d.path`, not the temporary.
  /// `seams`: system calls and GPU platform (tests); nullptr: the real ones. Errors: File::open's, naming d.path.
  [[nodiscard]] Result<File> open_file(const OutputDestination& d, const Config& config,
                                       const OpenOptions* seams = nullptr) const;
  /// Gives the file the destination's name. `replace`: atomically replaces an existing target (rename),
  /// carrying its mode (and owner where allowed) over; otherwise fails with already_exists if the name was
  /// taken meanwhile (linkat never replaces). `sync_directory`: fsync the directory afterwards.
  /// Errors name the destination's path.
  Status commit(const OutputDestination& d, bool replace, bool sync_directory);

 private:
  TempFile() = default;
  UniqueFd fd_;
  UniqueFd dir_;
  std::string name_;  // the name in dir_ while it has one and is not committed; "" for an unnamed file
  bool armed_ = false;  // whether name_ is the one the signal handlers remove (remove_named_temporary)
  std::vector<std::string> removed_stale_;
};

/// How every temporary's name begins.
inline constexpr char kTemporaryPrefix[] = ".ferry-";

/// Creates or replaces `path` with `bytes` by the rules above: a temporary file, written, fdatasync'ed when
/// `durable`, renamed over `path`, its directory fsync'ed when `durable`. For small files (an index);
/// errors name `path`, which is then as it was.
[[nodiscard]] Status replace_file_contents(const std::string& path, std::string_view bytes, bool durable);

/// Removes the named temporary that holds the signal handlers' one slot (the first uncommitted TempFile with a
/// name), if any. Async-signal-safe, keeps errno: for a program's handler of SIGINT, SIGTERM and SIGHUP
/// (cli/support/cleanup_signals.hpp); the library never takes over a process's signals.
void remove_named_temporary() noexcept;

}  // namespace ferry::detail
