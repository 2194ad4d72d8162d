// cuFile's own log: where it goes, and reading it back so that Ferry can quote cuFile's reason for a
// failure ("udev property not found: ID_FS_USAGE") instead of only its number.
//
// cuFile writes its log to the file named by CUFILE_LOGFILE_PATH (by default ./cufile.log in the working
// directory). Unless the user set that variable, Ferry points it at cufile.log in a directory of its own,
// made by mkdtemp (mode 0700) as ferry-cufile-<pid>-XXXXXX under $XDG_RUNTIME_DIR, else $TMPDIR, else /tmp,
// before cuFile is loaded: logs of concurrent processes do not mix, none lands in the caller's working
// directory, and no other user can plant a file or symlink where cuFile writes and Ferry reads (a fixed
// name in a shared /tmp allowed both). At exit the log is removed if empty, and the directory if then empty.
// Thread safety: all functions may be called from any thread. prepare_cufile_log() sets an environment
// variable (once, before cuFile is loaded); call it before starting threads that read the environment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::detail {

inline constexpr const char* kCuFileLogVariable = "CUFILE_LOGFILE_PATH";

/// Sets CUFILE_LOGFILE_PATH to Ferry's per-process file unless it is set already (even to empty, which
/// the user may use to silence cuFile), and returns the path cuFile will log to ("" when unknown, or when
/// no private directory could be made: then the variable is left unset).
/// Idempotent; the first call decides.
const std::string& prepare_cufile_log();

/// The path cuFile logs to (prepares it on first use).
std::string cufile_log_path();

/// The log's current size in bytes (0 when it does not exist): a mark to read only what comes after it.
std::uint64_t cufile_log_size();

/// The last `n` lines of the log, oldest first; empty when there is no log.
std::vector<std::string> cufile_log_tail(std::size_t n);

/// Lines written since `offset` (a cufile_log_size() mark), at most the last 64 KiB of them.
std::vector<std::string> cufile_log_lines_since(std::uint64_t offset);

/// The most recent of `lines` that contains one of `needles` (case-insensitive), trying the needles in order
/// of preference: {"udev", "error"} finds the newest udev line, else the newest error line.
std::optional<std::string> find_log_line(const std::vector<std::string>& lines,
                                         std::initializer_list<std::string_view> needles);

/// The words cuFile gives for a failure among `lines`: the newest line about udev, else about an error,
/// a failure or something unsupported; trimmed of surrounding white space.
std::optional<std::string> cufile_failure_reason(const std::vector<std::string>& lines);

}  // namespace ferry::detail
