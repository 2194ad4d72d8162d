// Option handling shared by the command-line programs.
#include "cli_common.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "cli/support/cleanup_signals.hpp"

namespace ferry::cli {

CLI::Validator not_empty(const std::string& instead) {
  return CLI::Validator(
      [instead](std::string& value) -> std::string {
        if (!value.empty()) return {};
        return fmt::format("cannot use \"\" (an empty value; {})", instead);
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
  struct Given {
    const char* setting;
    const char* option;
    bool given;
    std::string value;
  };
  const Given given[] = {{"threads", "--threads", !o.threads.empty(), o.threads},
                         {"task_size", "--task-size", !o.task_size.empty(), o.task_size},
                         {"direct_io", "--direct-io", !o.direct_io.empty(), o.direct_io},
                         {"compat_mode", "--compat", !o.compat.empty(), o.compat},
                         {"require", "--require-gds", o.require_gds, "gds"}};
  // Config::from_environment() with the variables of the settings given here left out, so that an option
  // wins over its variable without the variable being parsed first.
  Config c;
  for (const SettingInfo& row : settings_table()) {
    const bool overridden =
        std::any_of(std::begin(given), std::end(given), [&](const Given& g) { return g.given && row.name == g.setting; });
    const char* value = overridden ? nullptr : std::getenv(row.env.c_str());
    if (value == nullptr) continue;
    Status s = c.set(row.env, value, SettingSource::environment);
    if (!s.ok()) throw SettingsError{s};
  }
  for (const Given& g : given) {
    if (g.given) set_option(c, g.setting, g.option, g.value);
  }
  set_default_config(c);
  return c;
}

std::string count_of(std::uint64_t n, std::string_view singular, std::string_view plural) {
  if (n == 1) return fmt::format("1 {}", singular);
  return plural.empty() ? fmt::format("{} {}s", n, singular) : fmt::format("{} {}", n, plural);
}

bool asks_for_json(int argc, char** argv) {
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) return true;
  }
  return false;
}

namespace {

// Edit distance (insertions, deletions, substitutions) between two option names.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Every spelling of `cmd`'s options: "--size", "-h", ...
std::vector<std::string> option_spellings(const CLI::App& cmd) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& n : opt->get_lnames()) out.push_back("--" + n);
    for (const std::string& n : opt->get_snames()) out.push_back("-" + n);
  }
  return out;
}

// The first argument of `cmd`'s part of the command line that looks like an option and is none of its own
// ("--sise" of "--sise=4M" too), or empty. `first` is the index of the first argument after the command's
// name. Arguments after "--" are operands.
std::string first_unknown_option(const CLI::App& cmd, int first, int argc, char** argv) {
  for (int i = first; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || std::isdigit(static_cast<unsigned char>(arg[1]))) continue;
    std::string name(arg.substr(0, arg.find('=')));
    if (cmd.get_option_no_throw(name) == nullptr) return name;
  }
  return {};
}

// "unknown option --sise (did you mean --size?)"; without a close name, where to find the options.
std::string unknown_option_message(const CLI::App& cmd, const std::string& name, const std::string& program,
                                   const std::string& usage) {
  std::string best;
  std::size_t best_distance = std::string::npos;
  for (const std::string& known : option_spellings(cmd)) {
    std::size_t d = edit_distance(name, known);
    if (d < best_distance) {
      best = known;
      best_distance = d;
    }
  }
  // Close: a slip of one or two characters, and fewer than a third of the name.
  if (best_distance <= 2 && best_distance * 3 < name.size()) {
    return fmt::format("unknown option {} (did you mean {}?)", name, best);
  }
  // An option of another command of the same program ("ferry write --offset").
  if (const CLI::App* parent = cmd.get_parent()) {
    for (const CLI::App* other : parent->get_subcommands([](const CLI::App*) { return true; })) {
      if (other != &cmd && other->get_option_no_throw(name) != nullptr) {
        return fmt::format("unknown option {} ({} is an option of {} {}; {} --help lists this command's)", name,
                           name, program, other->get_name(), usage);
      }
    }
  }
  return fmt::format("unknown option {} ({} --help lists the options)", name, usage);
}

}  // namespace

int parse_and_run(CLI::App& app, int argc, char** argv, const std::string& program, const std::string& command,
                  const std::function<int()>& run) {
  const bool json = asks_for_json(argc, argv);
  set_command(program, json, command);
  // Ctrl-C and the like: an error object with --json, a message on stderr, then the process dies of the
  // signal (exit status 128 + N), removing a temporary file `ferry write` has made.
  install_cleanup_signal_handlers();
  // The app of the command that runs (a subcommand of `ferry`, or ferry-bench itself), and where its
  // arguments start.
  const CLI::App* cmd = &app;
  int first = 1;
  std::string usage = program;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() != command) continue;
    cmd = sub;
    usage = program + " " + command;
    while (first < argc && argv[first] != command) ++first;
    ++first;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    // CLI11 names unexpected arguments in reverse order and without a hint; name the first unknown option.
    std::string unknown = dynamic_cast<const CLI::ExtrasError*>(&e) ? first_unknown_option(*cmd, first, argc, argv)
                                                                     : std::string();
    std::string message = e.what();
    if (!unknown.empty()) {
      message = unknown_option_message(*cmd, unknown, program, usage);
    } else if (dynamic_cast<const CLI::ExtrasError*>(&e) || dynamic_cast<const CLI::RequiredError*>(&e)) {
      message += fmt::format(" ({} --help shows the usage)", usage);
    }
    return fail(ErrorCode::invalid_argument, message, kExitUsage);
  }
  try {
    return run();
  } catch (const UsageError& e) {
    return fail(ErrorCode::invalid_argument, e.message, kExitUsage);
  } catch (const SettingsError& e) {
    return fail(e.status, kExitFailure);
  }
}

}  // namespace ferry::cli
