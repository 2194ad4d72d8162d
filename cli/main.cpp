// `ferry`: read and write files into GPU or host memory, and show which route every byte took.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "cli_common.hpp"
#include "ferry/remote.hpp"
#include "doctor_command.hpp"
#include "io_commands.hpp"
#include "load_command.hpp"
#include "version_text.hpp"

namespace {

constexpr const char* kFooter = R"(
Exit status: 0 success; 1 the operation failed (missing file, permission denied, I/O error, no GPU, a
FERRY_* variable that does not parse); 2 bad command line (unknown option, unparsable size); 3 --verify
found different bytes; 4 the required route (--require-gds) is not available; 128 + N killed by signal N
(130: Ctrl-C; with --json an error object with code "cancelled" is printed first).
Sizes accept suffixes: 4096, 16k, 4MiB, 1G (binary) or 1GB (decimal).
Settings also come from FERRY_* environment variables (an option wins over its variable); see
docs/settings.md. Benchmarks: ferry-bench, a program of its own, built beside ferry by a full build
(scripts/run.sh builds only ferry); see bench/README.md.)";

constexpr const char* kWriteFooter = R"(
FILE is replaced only when the new data is complete (and synced, unless --no-sync): until then it is left
as it was, also when ferry is interrupted (SIGINT, SIGTERM, SIGHUP: nothing is left behind, and the exit
status is 128 + the signal, 130 for Ctrl-C). The new data goes into an unnamed file (O_TMPFILE; where the
file system lacks it, a random name created with O_EXCL|O_NOFOLLOW), so a planted name is never written
through. An existing FILE keeps its mode (and, for root, owner and group); a new one gets 0666 & ~umask.
ferry write refuses, with exit status 1: a directory, device, FIFO or socket (never replaced); a FILE that
`>` could not write (permission_denied); a dangling symlink; a symlink owned by another user in a sticky,
world-writable directory.)";

// The first argument that is not an option: the subcommand the user meant. The top level has only flags
// (--help, --version), so nothing before it takes a value.
const char* first_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return i + 1 < argc ? argv[i + 1] : nullptr;
    if (argv[i][0] != '-') return argv[i];
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ferry::cli;
  using ferry::ErrorCode;
  CLI::App app{"ferry: file data into GPU or host memory at the speed the hardware allows, with proof of the route taken",
               "ferry"};
  app.footer(kFooter);
  app.require_subcommand(1);
  // Only when asked: loads libcuda and libcufile to ask their versions, never cuFile's driver (see version_text.hpp).
  app.set_version_flag("--version", std::function<std::string()>([] { return version_text(FERRY_VERSION_TEXT); }),
                       "Print Ferry's version, and the CUDA driver's and cuFile's found at run time");

  CommonOptions read_opts;
  std::string read_path, read_offset, read_size;
  bool verify = false;
  CLI::App* read = app.add_subcommand("read", "Read FILE (or part of it) into host memory or a GPU; print throughput and the route report");
  read->add_option("FILE", read_path, "File to read")->required();
  read->add_option("--offset", read_offset, "Byte offset to start at (default 0)")->check(not_empty());
  read->add_option("--size", read_size, "Bytes to read, at most what the file holds from the offset (default: to the "
                                        "end of the file)")
      ->check(not_empty());
  read->add_flag("--verify", verify, "Compare the bytes with a plain sequential read of the file");
  add_common_options(*read, read_opts);

  CommonOptions write_opts;
  std::string write_path, write_size;
  bool no_sync = false;
  CLI::App* write = app.add_subcommand("write", "Write SIZE bytes of generated data to FILE: into a new file beside it, "
                                                "renamed over FILE when complete (FILE is untouched until then)");
  write->add_option("FILE", write_path, "Regular file to create or replace (through a symlink: the file it leads to); "
                                        "devices, FIFOs and files you may not write are refused")
      ->required();
  write->add_option("--size", write_size, "Bytes to write, e.g. 1GiB")->required()->check(not_empty("give a size, e.g. 1GiB"));
  write->add_flag("--no-sync", no_sync, "Skip fdatasync before the rename");
  write->footer(kWriteFooter);
  add_common_options(*write, write_opts);

  DoctorCommandOptions doctor_opts;
  CLI::App* doctor = app.add_subcommand("doctor", "Check CUDA, cuFile, nvidia-fs, the platform and PATH; predict (and with --probe prove) the route a read of PATH into a GPU takes, and why");
  add_doctor_options(*doctor, doctor_opts);

  LoadCommandOptions load_opts;
  CLI::App* load = add_load_command(app, load_opts);

  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    commands.push_back(sub->get_name());
  }
  const char* word = first_word(argc, argv);
  if (word != nullptr && std::find(commands.begin(), commands.end(), word) == commands.end()) {
    ferry::cli::set_command("ferry", asks_for_json(argc, argv), "");
    return fail(ErrorCode::invalid_argument,
                fmt::format("unknown command \"{}\"; the commands are: {} (ferry --help describes them)", word,
                            fmt::join(commands, ", ")),
                kExitUsage);
  }
  // After parsing, `word` is the command that was chosen.
  return parse_and_run(app, argc, argv, "ferry", word ? word : "", [&] {
    // write makes a local file: a URL would become a local path named like it.
    if (*write && ferry::remote::is_remote_url(write_path)) {
      return fail(ErrorCode::invalid_argument,
                  fmt::format("ferry write works on local files; \"{}\" is a URL (remote objects are read with ferry "
                              "read, and cannot be written)",
                              ferry::remote::display_url(write_path)),
                  kExitUsage);
    }
    if (*read) return run_read(read_path, read_offset, read_size, verify, read_opts);
    if (*write) return run_write(write_path, write_size, no_sync, write_opts);
    if (*doctor) return run_doctor_command(doctor_opts);
    if (*load) return run_load(load_opts);
    return kExitUsage;
  });
}
