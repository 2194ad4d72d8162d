// Option handling shared by the command-line programs.
#include "cli_common.hpp"

#include <cctype>
#include <cstring>

#include <fmt/format.h>

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

void set_option(Config& config, const char* setting, const char* option, const std::string& value) {
  Status s = config.set(setting, value);
  if (s.ok()) return;
  // The setting's name means little on a command line: name the option instead.
  std::string msg = s.message();
  for (auto at = msg.find(setting); at != std::string::npos; at = msg.find(setting, at + std::strlen(option)))
    msg.replace(at, std::strlen(setting), option);
  throw UsageError{msg};
}

Config build_config(const CommonOptions& o) {
  auto base = default_config();
  if (!base.ok()) throw UsageError{base.status().message()};
  Config c = *base;
  auto apply = [&](const char* setting, const char* option, const std::string& value) {
    if (!value.empty()) set_option(c, setting, option, value);
  };
  apply("threads", "--threads", o.threads);
  apply("task_size", "--task-size", o.task_size);
  apply("direct_io", "--direct-io", o.direct_io);
  apply("compat_mode", "--compat", o.compat);
  if (o.require_gds) c.set_require(Requirement::gds);
  return c;
}

bool asks_for_json(int argc, char** argv) {
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) return true;
  }
  return false;
}

int parse_and_run(CLI::App& app, int argc, char** argv, const std::string& program, const std::string& command,
                  const std::function<int()>& run) {
  const bool json = asks_for_json(argc, argv);
  tooling::set_command(program, json, command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (app.exit(e) == 0) return kExitOk;  // --help, --version
    // CLI11 has printed its message on stderr; with --json stdout gets the same as an error object.
    if (json) tooling::print_json(tooling::error_json(Status(ErrorCode::invalid_argument, e.what()), kExitUsage, command));
    return kExitUsage;
  }
  try {
    return run();
  } catch (const UsageError& e) {
    return fail(ErrorCode::invalid_argument, e.message, kExitUsage);
  }
}

}  // namespace ferry::cli
