// `ferry write`: write generated data from host or GPU memory into a file, never leaving it half-written.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ferry_tooling/device_memory.hpp"
#include "ferry_tooling/generated_data.hpp"
#include "ferry_tooling/host_memory.hpp"
#include "ferry_tooling/json_text.hpp"
#include "ferry_tooling/output_file.hpp"
#include "ferry_tooling/progress.hpp"
#include "ferry_tooling/timing.hpp"
#include "io_commands.hpp"

namespace ferry::cli {

using namespace ferry::tooling;

int run_write(const std::string& path, const std::string& size_text, bool no_sync, const CommonOptions& o) {
  Config config = build_config(o);
  std::uint64_t size = parse_size_option(size_text, "--size");
  install_cleanup_signal_handlers();
  // Refusals first, before any memory is filled: what FILE is, and whether `>` could write it.
  auto dest = inspect_destination(path);
  if (!dest.ok()) return fail(dest.status(), kExitFailure);

  auto host = HostMemory::allocate(size, HostMemory::Touch::now);
  if (!host.ok()) return fail(host.status(), kExitFailure);
  fill_generated(host->data(), size, 0);
  std::optional<DeviceMemory> device;
  const void* source = host->data();
  if (o.device >= 0) {
    auto d = DeviceMemory::allocate(o.device, size);
    Status s = d.ok() ? d->copy_from_host(host->data(), size) : d.status();
    if (!s.ok()) return fail(s, kExitFailure);
    device.emplace(std::move(*d));
    source = device->pointer();
  }

  // Write into a new file beside the target and rename it over the target at the end: readers never see a
  // half-written file, and an interrupted write leaves the target as it was (ferry_tooling/output_file.hpp).
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
  if (failure.ok()) failure = temp->commit(*dest, /*replace=*/true, /*sync_directory=*/!no_sync);
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
    j["report"] = report_json(t.report);
    print_json(j);
  } else {
    std::string where = dest->through_symlink ? fmt::format("\"{}\" (through its link, replacing \"{}\")", path,
                                                            dest->target)
                                              : fmt::format("\"{}\"", path);
    std::cout << fmt::format("wrote {} to {} from {} in {:.3f} s: {:.2f} GiB/s (sync: {})\n", format_size(size),
                             where, o.device >= 0 ? fmt::format("GPU {}", o.device) : "host memory", seconds, gib_s,
                             sync_policy);
    std::cout << t.report.summary() << "\n\n" << t.report.table();
  }
  return kExitOk;
}

}  // namespace ferry::cli
