// `ferry write`: write generated data from host or GPU memory into a file, never leaving it half-written.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "device_memory.hpp"
#include "host_buffer.hpp"

namespace ferry::cli {

int run_write(const std::string& path, const std::string& size_text, bool no_sync, const CommonOptions& o) {
  Config config = build_config(o);
  std::uint64_t size = parse_size_option(size_text, "--size");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    print_error(fmt::format("is_a_directory: Could not write \"{}\": it is a directory", path));
    return kExitFailure;
  }

  auto host = allocate_host(size);
  if (!host) {
    print_error(fmt::format("could not allocate {} of host memory", format_size(size)));
    return kExitFailure;
  }
  fill_generated(host.get(), size, 0);
  std::optional<DeviceBuffer> device;
  const void* source = host.get();
  if (o.device >= 0) {
    auto d = DeviceBuffer::allocate(o.device, size);
    Status s = d.ok() ? d->copy_from_host(host.get(), size) : d.status();
    if (!s.ok()) {
      print_error(s.to_string());
      return kExitFailure;
    }
    device.emplace(std::move(*d));
    source = device->pointer();
  }

  // Write beside the target and rename at the end: readers never see a half-written file.
  std::string partial = fmt::format("{}.ferry-partial-{}", path, ::getpid());
  auto file = File::open(partial, "w", config);
  if (!file.ok()) {
    print_error(file.status().to_string());
    return exit_code_for(file.status());
  }
  std::uint64_t start = now_ns();
  Future pending = file->pwrite(source, size, 0);
  wait_with_progress(pending, "writing", size);
  auto result = pending.get();
  Status synced = result.ok() && !no_sync ? file->sync() : Status();
  double seconds = seconds_since(start);
  Status closed = file->close();
  Status failure = !result.ok() ? result.status() : !synced.ok() ? synced : closed;
  if (!failure.ok()) {
    std::remove(partial.c_str());
    // Name the file the user asked for, not the temporary one.
    std::string msg = failure.to_string();
    for (auto at = msg.find(partial); at != std::string::npos; at = msg.find(partial)) msg.replace(at, partial.size(), path);
    print_error(msg);
    return kExitFailure;
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    Status s = Status::from_errno(errno, fmt::format("Could not rename \"{}\" to \"{}\"", partial, path), path);
    std::remove(partial.c_str());
    print_error(s.to_string());
    return kExitFailure;
  }

  const Transfer& t = *result;
  double gib_s = gib_per_s(size, seconds);
  const char* sync_policy = no_sync ? "none (data may still be in the page cache)" : "fdatasync before rename";
  if (o.json) {
    nlohmann::json j;
    j["command"] = "write";
    j["path"] = path;
    j["bytes"] = size;
    j["seconds"] = seconds;
    j["gib_per_s"] = gib_s;
    j["sync"] = no_sync ? "none" : "fdatasync";
    j["source"] = o.device >= 0 ? nlohmann::json(o.device) : nlohmann::json("host");
    j["report"] = nlohmann::json::parse(t.report.to_json());
    std::cout << j.dump() << "\n";
  } else {
    std::cout << fmt::format("wrote {} to \"{}\" from {} in {:.3f} s: {:.2f} GiB/s (sync: {})\n",
                             format_size(size), path, o.device >= 0 ? fmt::format("GPU {}", o.device) : "host memory",
                             seconds, gib_s, sync_policy);
    std::cout << t.report.summary() << "\n\n" << t.report.table();
  }
  return kExitOk;
}

}  // namespace ferry::cli
