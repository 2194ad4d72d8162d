// cli/support/command_output.hpp: how Ferry's commands (`ferry`, `ferry-bench`) print their JSON documents
// and report failures, so that every command does both the same way.
//
// Part of cli/support (its CMakeLists.txt says who links it). Documents go through the library's JSON
// writer (json_text.hpp), which encodes names that are not UTF-8 instead of aborting. A failure is always
// "<program>: <message>" on stderr; where the command line asked for --json it is also one JSON object on
// stdout (schema ferry.error/1, README "Command line"), so that a script reading stdout gets a document
// either way.
// Thread safety: for a program's main thread (the settings below are process-wide).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ferry/status.hpp"

namespace ferry::cli {

inline constexpr const char* kErrorSchema = "ferry.error/1";

/// The program named in messages ("ferry", "ferry-bench"), whether failures are also printed as JSON, and
/// the command ("read"; empty for none), as the error object names it. main() sets them before running a
/// command.
void set_command(const std::string& program, bool json_errors, const std::string& command);

/// `document` as one line of JSON on stdout (json_dump), then a newline.
void print_json(const nlohmann::json& document);

/// "<program>: <message>" on stderr.
void print_error(const std::string& message);

/// Reports a failure (see the top of this file) and returns `exit_status`, so that call sites read
/// `return fail(status, exit_status_for(status));`. At most one JSON error object is printed per process.
int fail(const Status& status, int exit_status);
/// The same for a failure without a Status of its own: stderr shows `message` alone; `code` is the error
/// object's ("invalid_argument" for the command line).
int fail(ErrorCode code, const std::string& message, int exit_status);

/// For a handler of SIGINT, SIGTERM or SIGHUP that ends the command (cleanup_signals.hpp):
/// "<program>: cancelled: interrupted by SIGINT" on stderr and, where the command line asked for --json and
/// no document has been printed yet, the error object (code "cancelled", exit_status 128 + `sig`) on
/// stdout. Async-signal-safe: it only write(2)s text set_command() prepared. Other signals: nothing.
void report_signal(int sig) noexcept;

/// {"schema": "ferry.error/1", "command", "code", "message", "path", "errno": {"name", "number"} | null,
/// "exit_status"} for `status`; "message" is the text stderr shows (Status::to_string()); "command" and
/// "path" are null when empty.
nlohmann::json error_json(const Status& status, int exit_status, const std::string& command);

}  // namespace ferry::cli
