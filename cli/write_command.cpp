// `ferry write`: write generated data from host or GPU memory into a file, never leaving it half-written.
#include <atomic>
#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/host_memory.hpp"
#include "base/timing.hpp"
#include "cli/support/generated_data.hpp"
#include "cli/support/json_text.hpp"
#include "cli/support/pieces.hpp"
#include "cli/support/progress.hpp"
#include "file/output_file.hpp"
#include "io_commands.hpp"
#include "platform/cuda/device_memory.hpp"

namespace ferry::cli {

using detail::DeviceMemory;
using detail::gib_per_s;
using detail::HostMemory;
using detail::inspect_destination;
using detail::now_ns;
using detail::seconds_since;
using detail::TempFile;

int run_write(const std::string& path, const std::string& size_text, bool no_sync, const CommonOptions& o) {
  const std::uint64_t command_start = now_ns();
  Config config = build_config(o);
  std::uint64_t size = parse_size_option(size_text, "--size");
  // Refusals first, before any memory is filled: what FILE is, and whether `>` could write it.
  auto dest = inspect_destination(path);
  if (!dest.ok()) return fail(dest.status(), kExitFailure);

  // The data has to exist before it is written, but making it is not the write: it is spread over the worker
  // threads, shown on a terminal ("generating 1.20 GiB of 4.00 GiB") and reported apart (prepare_seconds),
  // so that the write's time is the I/O's and the rest of the wall time is accounted for. (It used to be
  // done silently on one thread, after touching every page first: 3-6 s of a 4 GiB write that reported
  // 1.4 s, issue 48.) The pages are first touched by the threads that fill them.
  const std::uint64_t prepare_start = now_ns();
  auto host = HostMemory::allocate(size);
  if (!host.ok()) return fail(host.status(), kExitFailure);
  std::atomic<std::uint64_t> generated{0};
  run_with_progress(
      [&] {
        (void)for_each_piece(size, kPieceBytes, config.threads(),
                             [&](std::uint64_t at, std::uint64_t length, std::vector<std::uint8_t>&) {
                               fill_generated(host->data() + at, length, at);
                               generated += length;
                               return Status();
                             });
      },
      generated, "generating", size);
  std::string prepare = fmt::format("generating {} of data in host memory", format_size(size));
  std::optional<DeviceMemory> device;
  const void* source = host->data();
  if (o.device >= 0) {
    auto d = DeviceMemory::allocate(o.device, size);
    Status s = d.ok() ? d->copy_from_host(host->data(), size) : d.status();
    if (!s.ok()) return fail(s, kExitFailure);
    device.emplace(std::move(*d));
    source = device->pointer();
    prepare += fmt::format(" and copying it to GPU {}", o.device);
  }
  const double prepare_seconds = seconds_since(prepare_start);

  // Write into a new file beside the target and rename it over the target at the end: readers never see a
  // half-written file, and an interrupted write leaves the target as it was (file/output_file.hpp).
  auto temp = TempFile::create(*dest);
  if (!temp.ok()) return fail(temp.status(), kExitFailure);
  // The File names FILE in its messages and reports, not the temporary file.
  auto file = temp->open_file(*dest, config);
  if (!file.ok()) return fail(file.status(), exit_status_for(file.status()));
  std::uint64_t start = now_ns();
  Future pending = file->pwrite(source, size, 0);
  wait_with_progress(pending, "writing", size);
  auto result = pending.get();
  Status synced = result.ok() && !no_sync ? file->sync() : Status();
  double seconds = seconds_since(start);  // the data and its sync; not the rename
  Status closed = file->close();
  Status failure = !result.ok() ? result.status() : !synced.ok() ? synced : closed;
  // The rename over FILE (which frees the old file's blocks) and the directory's sync, timed apart too.
  const std::uint64_t commit_start = now_ns();
  if (failure.ok()) failure = temp->commit(*dest, /*replace=*/true, /*sync_directory=*/!no_sync);
  const double commit_seconds = seconds_since(commit_start);
  // The temporary file goes with `temp`; FILE is as it was.
  if (!failure.ok()) return fail(failure, exit_status_for(failure, config.require()));

  const Transfer& t = *result;
  double gib_s = gib_per_s(size, seconds);
  const char* sync_policy =
      no_sync ? "none (data may still be in the page cache)" : "fdatasync before rename, then the directory";
  if (o.json) {
    nlohmann::json j;
    j["schema"] = kWriteSchema;
    j["command"] = "write";
    j["path"] = path;
    j["target"] = dest->target;
    j["replaced"] = dest->exists;
    j["bytes"] = size;
    j["seconds"] = seconds;
    j["gib_per_s"] = gib_s;
    j["sync"] = no_sync ? "none" : "fdatasync";
    j["source"] = o.device >= 0 ? nlohmann::json(o.device) : nlohmann::json("host");
    j["prepare_seconds"] = prepare_seconds;
    j["prepare"] = prepare;
    j["commit_seconds"] = commit_seconds;
    j["report"] = report_json(t.report);
    // From the start of the command to this document: the three times above and the checks before them.
    j["wall_seconds"] = seconds_since(command_start);
    print_json(j);
  } else {
    std::string where = dest->through_symlink ? fmt::format("\"{}\" (through its link, replacing \"{}\")", path,
                                                            dest->target)
                                              : fmt::format("\"{}\"", path);
    std::cout << fmt::format("wrote {} to {} from {} in {:.3f} s: {:.2f} GiB/s (sync: {})\n", format_size(size),
                             where, o.device >= 0 ? fmt::format("GPU {}", o.device) : "host memory", seconds, gib_s,
                             sync_policy);
    // Each shown where it is more than the rounding of the times printed.
    if (prepare_seconds >= 0.0005) std::cout << fmt::format("before the write: {:.3f} s {}\n", prepare_seconds, prepare);
    if (commit_seconds >= 0.0005) {
      std::cout << fmt::format("after it: {:.3f} s renaming it over \"{}\"{}\n", commit_seconds, dest->target,
                               no_sync ? "" : " and syncing the directory");
    }
    std::cout << t.report.summary() << "\n\n" << t.report.table();
  }
  return kExitOk;
}

}  // namespace ferry::cli
