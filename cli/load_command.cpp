// `ferry load`: open (headers, validation), allocate, read, and tell what happened.
#include "load_command.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/timing.hpp"
#include "cli/support/file_compare.hpp"
#include "cli/support/json_text.hpp"
#include "cli/support/progress.hpp"
#include "ferry/remote.hpp"
#include "ferry/safetensors.hpp"
#include "platform/cuda/device_memory.hpp"

namespace ferry::cli {
namespace {

using detail::copy_device_to_host;
using detail::gib_per_s;
using detail::now_ns;
using detail::seconds_since;
namespace st = ferry::safetensors;

constexpr const char* kLoadFooter = R"(
Exit status: 0 loaded; 1 the load failed (missing file, malformed checkpoint -- the message names the file
and the tensor --, I/O error, no GPU); 2 bad command line; 3 --verify found different bytes; 4 the required
route (--require-gds) is not available.)";

std::vector<int> parse_devices(const std::string& text) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    try {
      std::size_t used = 0;
      int d = std::stoi(item, &used);
      if (used != item.size() || d < 0) throw std::invalid_argument(item);
      out.push_back(d);
    } catch (const std::exception&) {
      throw UsageError{fmt::format("--replicas takes GPU ordinals separated by commas, not \"{}\"", item)};
    }
    start = comma + 1;
  }
  return out;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string device_text(int device) { return device == st::kHostMemory ? "host" : fmt::format("GPU {}", device); }

// Every copy of every tensor against the file, read with plain preads (file_compare.hpp).
VerifyOutcome verify_all(const st::Checkpoint& c, const st::LoadedCheckpoint& loaded) {
  std::vector<const std::vector<st::LoadedTensor>*> copies{&loaded.tensors};
  for (const auto& r : loaded.replicas) copies.push_back(&r);
  std::uint64_t bytes = 0;
  for (const auto* list : copies) {
    for (const st::LoadedTensor& t : *list) {
      const st::TensorInfo* info = c.find(t.name);
      std::vector<std::uint8_t> host;
      const auto* got = static_cast<const std::uint8_t*>(t.data);
      if (t.device != st::kHostMemory && t.size_bytes > 0) {
        host.resize(t.size_bytes);
        Status s = copy_device_to_host(t.device, t.data, host.data(), t.size_bytes);
        if (!s.ok()) return {false, s.to_string()};
        got = host.data();
      }
      VerifyOutcome v = compare_with_file(c.files()[info->shard], got, info->file_offset, t.size_bytes, 4);
      if (!v.ok) return {false, fmt::format("tensor \"{}\" on {}: {}", t.name, device_text(t.device), v.detail)};
      bytes += t.size_bytes;
    }
  }
  return {true, fmt::format("{}, {} match the files",
                            count_of(loaded.tensors.size() * copies.size(), "tensor copy", "tensor copies"),
                            format_size(bytes))};
}

// Whether the local file `path` cannot be a safetensors file, judged from its first nine bytes: such a file
// starts with the length of its header (8 bytes, little-endian), then the header, a JSON object ('{') that
// fits in the file, within the header limit (st::kDefaultMaxHeaderBytes, which `ferry load` keeps). False
// where it might be one (a header that only runs past the end: truncated, as the library's message says)
// and for what is not a regular local file (a directory, an index is JSON, a URL): the message as it is.
bool surely_not_safetensors(const std::string& path) {
  struct stat st {};
  if (remote::is_remote_url(path) || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      path.ends_with(".json")) {
    return false;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8) return true;
  unsigned char head[9] = {};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t got = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  if (got < 8) return false;
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | head[i];
  if (header_bytes > st::kDefaultMaxHeaderBytes || header_bytes == 0) return true;
  return header_bytes <= size - 8 && got == 9 && head[8] != '{';
}

}  // namespace

CLI::App* add_load_command(CLI::App& app, LoadCommandOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "load", "Load a safetensors checkpoint (a .safetensors file, a model.safetensors.index.json or a directory) "
              "into a GPU or host memory; list its tensors, the throughput and the route report");
  cmd->footer(kLoadFooter);
  cmd->add_option("CHECKPOINT", o.path, "Checkpoint to load")->required();
  cmd->add_option("--replicas", o.replicas, "Further GPUs that each get a whole copy, read once and copied GPU to "
                                            "GPU (e.g. 1,2; needs --device N)")
      ->check(not_empty());
  cmd->add_option("--max-request", o.max_request, "The largest single read, e.g. 1GiB (default: one per run of "
                                                  "tensors)")
      ->check(not_empty());
  cmd->add_flag("--verify", o.verify, "Compare every loaded byte with a plain read of the files");
  add_common_options(*cmd, o.common);
  return cmd;
}

int run_load(const LoadCommandOptions& o) {
  Config config = build_config(o.common);
  st::LoadOptions options;
  options.device = o.common.device;
  options.replicas = parse_devices(o.replicas);
  if (!options.replicas.empty() && options.device == st::kHostMemory) {
    throw UsageError{"--replicas needs --device N: the checkpoint is read into GPU N and copied from there to "
                     "each replica GPU"};
  }
  if (!o.max_request.empty()) options.max_request_bytes = parse_size_option(o.max_request, "--max-request");
  TerminalProgress progress(true, 1.0);  // "loading 2.50 GiB of 8.00 GiB (31%)", for loads of more than a second
  options.progress = [&progress](std::uint64_t done, std::uint64_t total) {
    progress.transient(amount_text("loading", done, total));
    return true;
  };
  st::OpenOptions open_options;
  open_options.config = config;

  std::uint64_t start = now_ns();
  auto checkpoint = st::Checkpoint::open(o.path, open_options);
  double open_seconds = seconds_since(start);
  // A malformed checkpoint is invalid_argument, and a failure of the load (exit 1), not of its command line.
  auto exit_status = [&](const Status& s) { return exit_status_for(s, config.require(), InvalidArgument::failure); };
  if (!checkpoint.ok()) {
    const Status& s = checkpoint.status();
    if (s.code() == ErrorCode::invalid_argument && surely_not_safetensors(o.path)) {
      // Said first, and in the words of a command line, whatever limit or check of the parser caught it.
      Status said(s.code(), "not a safetensors file: " + s.message(), s.sys_errno(), s.path());
      return fail(said, exit_status(said));
    }
    return fail(s, exit_status(s));
  }
  auto loaded = checkpoint->load(options);
  double seconds = seconds_since(start);
  progress.clear();
  if (!loaded.ok()) return fail(loaded.status(), exit_status(loaded.status()));
  const st::LoadStats& stats = loaded->stats;
  std::optional<VerifyOutcome> verified;
  if (o.verify) verified = verify_all(*checkpoint, *loaded);

  const double read_gib_s = gib_per_s(stats.bytes_read, stats.seconds);
  const double total_gib_s = gib_per_s(stats.bytes_read, seconds);
  std::vector<std::string> notes = checkpoint->notes();
  notes.insert(notes.end(), stats.notes.begin(), stats.notes.end());
  if (o.common.json) {
    nlohmann::json j;
    j["schema"] = kLoadSchema;
    j["command"] = "load";
    j["path"] = remote::display_url(o.path);
    j["files"] = checkpoint->files();
    j["target"] = options.device == st::kHostMemory ? nlohmann::json("host") : nlohmann::json(options.device);
    j["replicas"] = options.replicas;
    nlohmann::json tensors = nlohmann::json::array();
    for (const st::LoadedTensor& t : loaded->tensors) {
      const st::TensorInfo* info = checkpoint->find(t.name);
      tensors.push_back({{"name", t.name},
                         {"dtype", st::dtype_name(t.dtype)},
                         {"shape", t.shape},
                         {"device", t.device == st::kHostMemory ? nlohmann::json("host") : nlohmann::json(t.device)},
                         {"bytes", t.size_bytes},
                         {"file", info->shard},
                         {"file_offset", info->file_offset}});
    }
    j["tensors"] = std::move(tensors);
    j["metadata"] = loaded->metadata;
    j["bytes"] = stats.bytes_read;
    j["bytes_copied"] = stats.bytes_copied;
    j["requests"] = stats.requests;
    j["seconds"] = seconds;
    j["open_seconds"] = open_seconds;
    j["allocate_seconds"] = loaded->allocate_seconds;
    j["read_seconds"] = stats.seconds;
    j["gib_per_s"] = total_gib_s;
    j["read_gib_per_s"] = read_gib_s;
    j["settings"] = {{"threads", checkpoint->config().threads()},
                     {"task_size", checkpoint->config().task_size()},
                     {"direct_io", direct_io_name(checkpoint->config().direct_io())},
                     {"compat_mode", compat_mode_name(checkpoint->config().compat_mode())},
                     {"require", requirement_name(checkpoint->config().require())}};
    j["report"] = report_json(stats.report);
    j["notes"] = notes;
    if (verified) j["verify"] = {{"ok", verified->ok}, {"detail", verified->detail}};
    print_json(j);
  } else {
    std::string target = options.device == st::kHostMemory ? "host memory" : device_text(options.device);
    for (int r : options.replicas) target += fmt::format(" (+ a copy on GPU {})", r);
    std::cout << fmt::format("loaded {}, {} from {} of \"{}\" into {} in {:.3f} s: {:.2f} GiB/s "
                             "(reading {:.2f} GiB/s)\n",
                             count_of(loaded->tensors.size(), "tensor"), format_size(stats.bytes_read),
                             count_of(checkpoint->files().size(), "file"), remote::display_url(o.path), target,
                             seconds, total_gib_s, read_gib_s);
    std::cout << fmt::format("open {:.3f} s, allocate {:.3f} s, read {:.3f} s ({}{})\n", open_seconds,
                             loaded->allocate_seconds, stats.seconds, count_of(stats.requests, "request"),
                             stats.bytes_copied ? fmt::format(", {} copied GPU to GPU", format_size(stats.bytes_copied))
                                                : std::string());
    std::size_t name_width = 4, shape_width = 5;
    for (const auto& t : loaded->tensors) {
      name_width = std::max(name_width, t.name.size());
      shape_width = std::max(shape_width, shape_text(t.shape).size());
    }
    std::cout << "\n" << fmt::format("{:<{}}  {:<7}  {:<{}}  {}\n", "name", name_width, "dtype", "shape", shape_width, "device");
    for (const auto& t : loaded->tensors) {
      std::cout << fmt::format("{:<{}}  {:<7}  {:<{}}  {}\n", t.name, name_width, st::dtype_name(t.dtype),
                               shape_text(t.shape), shape_width, device_text(t.device));
    }
    if (!loaded->metadata.empty()) {
      std::cout << "\nmetadata:";
      for (const auto& [k, v] : loaded->metadata) std::cout << fmt::format(" {}={}", k, v);
      std::cout << "\n";
    }
    std::cout << "\n" << stats.report.summary() << "\n\n" << stats.report.table();
    for (const std::string& n : notes) std::cout << "note: " << n << "\n";
    if (verified) std::cout << "verify: " << (verified->ok ? "OK, " : "FAILED, ") << verified->detail << "\n";
  }
  if (verified && !verified->ok) {
    if (o.common.json) print_error("verify failed: " + verified->detail);
    return kExitMismatch;
  }
  return kExitOk;
}

}  // namespace ferry::cli
