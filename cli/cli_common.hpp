// What the command-line programs (`ferry`, `ferry-bench`) share: usage errors and the options every I/O
// command takes, kept as text until parsed so that an error names the option.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "base/exit_status.hpp"
#include "cli/support/command_output.hpp"
#include "ferry/ferry.hpp"

namespace ferry::cli {

using detail::exit_status_for;
using detail::InvalidArgument;
using detail::kExitFailure;
using detail::kExitMismatch;
using detail::kExitOk;
using detail::kExitUsage;

/// A usage error raised while interpreting options (exit 2).
struct UsageError {
  std::string message;
};

/// A FERRY_* environment variable that does not parse (exit 1, as `ferry doctor` reports it: the environment
/// is not the command line). `status` names the variable and the value.
struct SettingsError {
  Status status;
};

/// Options every I/O command shares.
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
/// quietly mean "not given". `instead` says what to give: "leave the option out to get its default" unless
/// given (a required option has no default).
CLI::Validator not_empty(const std::string& instead = "leave the option out to get its default");
/// For --device: a GPU ordinal, 0 or more (exit 2 otherwise). `without` says what leaving the option out
/// means ("host memory", "GPU 0").
CLI::Validator gpu_ordinal(const std::string& without);

void add_common_options(CLI::App& cmd, CommonOptions& o);
/// The command line's settings over the FERRY_* environment over the defaults; also made the process's
/// default (set_default_config), so that nothing in the process reads the environment again. An option
/// wins over its variable, which is then not read: a bad FERRY_TASK_SIZE does not fail a command given
/// --task-size. Throws UsageError for a bad option, SettingsError for a bad variable.
Config build_config(const CommonOptions& o);
/// config.set(setting, value) for the command line's `option`; throws UsageError naming the option.
void set_option(Config& config, const char* setting, const char* option, const std::string& value);
/// parse_size for an option; throws UsageError naming the option.
std::uint64_t parse_size_option(const std::string& text, const char* option);

/// Whether the command line asks for --json (anywhere before "--"): failures found while reading it are then
/// reported as JSON too.
bool asks_for_json(int argc, char** argv);

/// "1 thread", "4 threads"; `plural` for words that do not just take an "s" ("tensor copies").
std::string count_of(std::uint64_t n, std::string_view singular, std::string_view plural = {});

/// How both programs read their command line and run it: `program` and `command` name them in messages and
/// error objects (command_output.hpp), and SIGINT, SIGTERM and SIGHUP are reported as `cancelled` before
/// the process dies of them (install_cleanup_signal_handlers); --help and --version exit 0; a parse error
/// exits 2 with "<program>: <message>" (an unknown option named with the closest known one) and with --json
/// an error object; then `run` runs the command: a UsageError it throws exits 2, a SettingsError 1.
int parse_and_run(CLI::App& app, int argc, char** argv, const std::string& program, const std::string& command,
                  const std::function<int()>& run);

/// JSON schema names: every document `--json` prints names its kind and version in the key "schema",
/// "ferry.<command>/<version>" ("ferry.read/1"), as ferry.doctor/1 and ferry.error/1 do.
inline constexpr const char* kReadSchema = "ferry.read/1";
inline constexpr const char* kWriteSchema = "ferry.write/1";
inline constexpr const char* kLoadSchema = "ferry.load/1";

}  // namespace ferry::cli
