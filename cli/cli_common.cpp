// Option handling and error printing shared by the subcommands.
#include "cli_common.hpp"

#include <cctype>
#include <chrono>
#include <cstring>
#include <iostream>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ferry_tooling/json_text.hpp"

namespace ferry::cli {

CLI::Validator not_empty() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (!value.empty()) return {};
        return "cannot use \"\" (an empty value; leave the option out to get its default)";
      },
      "");
}

CLI::Validator gpu_ordinal(const std::string& without) {
  return CLI::Validator(
      [without](std::string& value) -> std::string {
        std::size_t digits = 0;
        while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits]))) ++digits;
        if (digits > 0 && digits == value.size() && digits <= 6) return {};
        return fmt::format("cannot use \"{}\" (expected a GPU ordinal: 0, 1, ...; leave --device out for {})", value,
                           without);
      },
      "");
}

void add_common_options(CLI::App& cmd, CommonOptions& o) {
  cmd.add_option("--threads", o.threads, "Worker threads for this request, 1 to 256 (default: FERRY_THREADS or CPUs, 4..16)")
      ->check(not_empty());
  cmd.add_option("--task-size", o.task_size, "Bytes per task, e.g. 4MiB (default: FERRY_TASK_SIZE or 4MiB)")
      ->check(not_empty());
  cmd.add_option("--direct-io", o.direct_io, "O_DIRECT policy: auto, on, off (default: auto)")->check(not_empty());
  cmd.add_option("--compat", o.compat, "cuFile use for device memory: auto, on (never), off (always)")
      ->check(not_empty());
  cmd.add_flag("--require-gds", o.require_gds, "Fail unless every operation takes cuFile's direct route");
  cmd.add_option("--device", o.device, "GPU ordinal to read into or write from (default: host memory)")
      ->check(gpu_ordinal("host memory"));
  cmd.add_flag("--json", o.json, "Print one JSON object instead of text");
}

std::uint64_t parse_size_option(const std::string& text, const char* option) {
  auto r = parse_size(text, option);
  if (!r.ok()) throw UsageError{r.status().message()};
  return *r;
}

Config build_config(const CommonOptions& o) {
  auto base = default_config();
  if (!base.ok()) throw UsageError{base.status().message()};
  Config c = *base;
  auto apply = [&](const char* setting, const char* option, const std::string& value) {
    if (value.empty()) return;
    Status s = c.set(setting, value);
    if (!s.ok()) {
      std::string msg = s.message();
      // The setting's name means little on a command line: name the option instead.
      auto at = msg.find(setting);
      if (at != std::string::npos) msg.replace(at, std::strlen(setting), option);
      throw UsageError{msg};
    }
  };
  apply("threads", "--threads", o.threads);
  apply("task_size", "--task-size", o.task_size);
  apply("direct_io", "--direct-io", o.direct_io);
  apply("compat_mode", "--compat", o.compat);
  if (o.require_gds) c.set_require(Requirement::gds);
  return c;
}

void wait_with_progress(const Future& future, const char* verb, std::uint64_t total) {
  if (!::isatty(STDERR_FILENO) || future.wait_for(std::chrono::milliseconds(1000))) {
    future.wait();
    return;
  }
  while (!future.wait_for(std::chrono::milliseconds(250))) {
    std::uint64_t done = future.bytes_done();
    std::cerr << fmt::format("\r{} {} of {} ({:.0f}%)   ", verb, format_size(done), format_size(total),
                             total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0)
              << std::flush;
  }
  std::cerr << "\r" << std::string(60, ' ') << "\r" << std::flush;
}

void print_error(const std::string& message) { std::cerr << "ferry: " << message << "\n"; }

namespace {
bool g_json_errors = false;
bool g_json_error_printed = false;
std::string g_command;
}  // namespace

void set_json_errors(bool on, const std::string& command) {
  g_json_errors = on;
  g_command = command;
}

bool json_errors() { return g_json_errors; }

std::string error_json(const Status& status, int exit_status, const std::string& command) {
  nlohmann::json j;
  j["schema"] = kErrorSchema;
  j["command"] = command.empty() ? nlohmann::json(nullptr) : nlohmann::json(command);
  j["code"] = error_code_name(status.code());
  j["message"] = status.to_string();
  j["path"] = status.path().empty() ? nlohmann::json(nullptr) : nlohmann::json(status.path());
  j["errno"] = status.sys_errno() == 0
                   ? nlohmann::json(nullptr)
                   : nlohmann::json{{"name", errno_name(status.sys_errno())}, {"number", status.sys_errno()}};
  j["exit_status"] = exit_status;
  return tooling::json_dump(j);
}

namespace {
void print_json_error(const Status& status, int exit_status) {
  if (!g_json_errors || g_json_error_printed) return;
  g_json_error_printed = true;
  std::cout << error_json(status, exit_status, g_command) << "\n" << std::flush;
}
}  // namespace

int fail(const Status& status, int exit_status) {
  print_error(status.to_string());
  print_json_error(status, exit_status);
  return exit_status;
}

int fail(ErrorCode code, const std::string& message, int exit_status) {
  print_error(message);  // as before --json existed: the message alone
  print_json_error(Status(code, message), exit_status);
  return exit_status;
}

int exit_code_for(const Status& s) {
  return s.code() == ErrorCode::invalid_argument && s.sys_errno() == 0 ? kExitUsage : kExitFailure;
}

}  // namespace ferry::cli
