// Shared pieces of the `ferry` subcommands: exit codes, option parsing helpers, output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ferry/ferry.hpp"
#include "throughput.hpp"

namespace ferry::cli {

// Exit codes, as documented in `ferry --help` and the README.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the operation failed: missing file, permission, I/O error, ...
inline constexpr int kExitUsage = 2;     // bad command line: unknown option, bad size suffix, ...
inline constexpr int kExitMismatch = 3;  // --verify found different bytes
inline constexpr int kExitRouteRefused = 4;  // --require-gds / doctor: the required route is not available

/// A usage error raised while interpreting options (exit 2).
struct UsageError {
  std::string message;
};

/// Options every I/O subcommand shares, kept as text until parsed so errors can name the option.
struct CommonOptions {
  std::string threads;
  std::string task_size;
  std::string direct_io;
  std::string compat;
  bool require_gds = false;
  bool json = false;
  int device = -1;  // -1: host memory (no --device; a negative --device is refused)
};

/// For every option that takes a value: an empty value is refused (exit 2), so that `--size ''` cannot
/// quietly mean "not given".
CLI::Validator not_empty();
/// For --device: a GPU ordinal, 0 or more (exit 2 otherwise). `without` says what leaving the option out
/// means ("host memory", "GPU 0").
CLI::Validator gpu_ordinal(const std::string& without);

void add_common_options(CLI::App& cmd, CommonOptions& o);
/// default_config() with the command line's settings applied. Throws UsageError.
Config build_config(const CommonOptions& o);
/// parse_size for an option; throws UsageError naming the option.
std::uint64_t parse_size_option(const std::string& text, const char* option);

/// "ferry: <message>" on stderr.
void print_error(const std::string& message);

/// JSON schema names: every document `--json` prints names its kind and version in the key "schema",
/// "ferry.<command>/<version>" ("ferry.read/1"), as ferry.doctor/1 does.
inline constexpr const char* kReadSchema = "ferry.read/1";
inline constexpr const char* kWriteSchema = "ferry.write/1";
inline constexpr const char* kErrorSchema = "ferry.error/1";

/// Where the command line asked for --json, a failure is reported twice: "ferry: <status>" on stderr as
/// always, and one JSON object (schema ferry.error/1) on stdout, so a script reading stdout gets a document
/// either way. main() sets this before running a subcommand; `command` names it ("read"), empty for none.
void set_json_errors(bool on, const std::string& command);
bool json_errors();

/// Reports a failure (see set_json_errors) and returns `exit_status`, so call sites read
/// `return fail(status, kExitFailure);`. At most one JSON error object is printed per process.
int fail(const Status& status, int exit_status);
/// The same for a failure without a Status: `code` is an ErrorCode's name ("invalid_argument" for usage).
int fail(ErrorCode code, const std::string& message, int exit_status);

/// {"schema": "ferry.error/1", "command", "code", "message", "path", "errno": {"name", "number"} | null,
/// "exit_status"} for `status`; "message" is the text stderr shows (Status::to_string()).
std::string error_json(const Status& status, int exit_status, const std::string& command);
/// Exit code for a failed Status: permission/missing/IO are failures; invalid arguments are usage.
int exit_code_for(const Status& s);

/// Waits for `future`, showing "reading 2.50 GiB of 8.00 GiB (31%)" on stderr when it is a terminal and
/// the wait lasts longer than a second.
void wait_with_progress(const Future& future, const char* verb, std::uint64_t total);

int run_read(const std::string& path, const std::string& offset, const std::string& size, bool verify,
             const CommonOptions& o);
int run_write(const std::string& path, const std::string& size, bool no_sync, const CommonOptions& o);

}  // namespace ferry::cli
