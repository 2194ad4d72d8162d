// `ferry read`: read a file (or part of it) into host or GPU memory, report throughput and routes.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "ferry/remote.hpp"
#include "ferry_tooling/device_memory.hpp"
#include "ferry_tooling/file_compare.hpp"
#include "ferry_tooling/host_memory.hpp"
#include "ferry_tooling/json_text.hpp"
#include "ferry_tooling/progress.hpp"
#include "ferry_tooling/timing.hpp"
#include "io_commands.hpp"

namespace ferry::cli {

using namespace ferry::tooling;

int run_read(const std::string& path, const std::string& offset_text, const std::string& size_text, bool verify,
             const CommonOptions& o) {
  Config config = build_config(o);
  std::uint64_t offset = offset_text.empty() ? 0 : parse_size_option(offset_text, "--offset");

  auto file = File::open(path, "r", config);
  if (!file.ok()) return fail(file.status(), exit_status_for(file.status()));
  auto file_size = file->size();
  if (!file_size.ok()) return fail(file_size.status(), kExitFailure);
  // Never more than the file holds from the offset: --size is an upper bound, and memory for bytes that do
  // not exist would be allocated (and filled) for nothing.
  const std::uint64_t available = *file_size > offset ? *file_size - offset : 0;
  std::uint64_t size = available;
  std::optional<std::uint64_t> asked;
  if (!size_text.empty()) {
    asked = parse_size_option(size_text, "--size");
    size = std::min(*asked, available);
  }
  const bool clamped = asked && *asked > size;
  std::string clamp_note;
  if (clamped) {
    clamp_note = fmt::format("--size {} is more than the file holds from offset {} ({} of {}): reading {}",
                             format_size(*asked), offset, format_size(available), format_size(*file_size),
                             format_size(size));
  }

  // Destination: host memory, or device memory of GPU `o.device`.
  std::optional<HostMemory> host;
  std::optional<DeviceMemory> device;
  void* destination = nullptr;
  if (o.device >= 0) {
    auto d = DeviceMemory::allocate(o.device, size);
    if (!d.ok()) return fail(d.status(), kExitFailure);
    device.emplace(std::move(*d));
    destination = device->pointer();
  } else {
    // Touched now, so that the throughput is the read's and not the first-touch faults'; a remote object's size
    // is what its server claims, so memory for it is made as the bytes arrive.
    auto h = HostMemory::allocate(size, remote::is_remote_url(path) ? HostMemory::Touch::on_use : HostMemory::Touch::now);
    if (!h.ok()) return fail(h.status(), kExitFailure);
    host.emplace(std::move(*h));
    destination = host->data();
  }

  // One-time work (loading CUDA and cuFile, registering the file, pinning bounce buffers) is timed apart
  // from the transfer, so the throughput shown is the transfer's and the set-up cost is not hidden.
  std::uint64_t setup_start = now_ns();
  auto plan = file->prepare(destination, size);
  double setup_seconds = seconds_since(setup_start);
  if (!plan.ok()) return fail(plan.status(), exit_status_for(plan.status(), config.require()));
  std::uint64_t start = now_ns();
  Future pending = file->pread(destination, size, offset);
  wait_with_progress(pending, "reading", size);
  auto result = pending.get();
  double seconds = seconds_since(start);
  if (!result.ok()) return fail(result.status(), exit_status_for(result.status(), config.require()));
  const Transfer& t = *result;

  std::optional<VerifyOutcome> verified;
  if (verify) {
    std::optional<HostMemory> copy;
    if (device) {
      auto c = HostMemory::allocate(t.bytes);
      Status s = c.ok() ? device->copy_to_host(c->data(), t.bytes) : c.status();
      if (!s.ok()) return fail(s, kExitFailure);
      copy.emplace(std::move(*c));
    }
    const std::uint8_t* got = copy ? copy->data() : host->data();
    verified = compare_with_file(path, got, offset, t.bytes, 1);  // a plain sequential read
    if (verified->reference_failed) {
      return fail(Status(ErrorCode::io_error, fmt::format("--verify of \"{}\" compared nothing: {}", file->path(),
                                                           verified->detail), 0, file->path()),
                  kExitFailure);
    }
  }

  double gib_s = gib_per_s(t.bytes, seconds);
  std::string target = o.device >= 0 ? fmt::format("GPU {}", o.device) : "host memory";
  if (o.json) {
    nlohmann::json j;
    j["schema"] = kReadSchema;
    j["command"] = "read";
    j["path"] = file->path();  // a URL's display form: no credentials, no query
    j["offset"] = offset;
    j["requested_bytes"] = asked ? *asked : size;
    j["size_clamped"] = clamped;
    j["bytes"] = t.bytes;
    j["seconds"] = seconds;
    j["setup_seconds"] = setup_seconds;
    j["plan"] = plan->to_string();
    j["gib_per_s"] = gib_s;
    j["target"] = o.device >= 0 ? nlohmann::json(o.device) : nlohmann::json("host");
    j["settings"] = {{"threads", config.threads()},
                     {"task_size", config.task_size()},
                     {"direct_io", direct_io_name(config.direct_io())},
                     {"compat_mode", compat_mode_name(config.compat_mode())},
                     {"require", requirement_name(config.require())}};
    j["report"] = report_json(t.report);
    // Everything this process set up once (CUDA, contexts, cuFile, pinned buffers, threads), step by step.
    j["setup_costs"] = nlohmann::json::parse(process_setup_costs().to_json());
    if (verified) j["verify"] = {{"ok", verified->ok}, {"detail", verified->detail}};
    if (clamped) j["note"] = clamp_note;
    print_json(j);
  } else {
    std::cout << fmt::format("read {} of \"{}\" at offset {} into {} in {:.3f} s: {:.2f} GiB/s\n",
                             format_size(t.bytes), file->path(), offset, target, seconds, gib_s);
    if (clamped) std::cout << "note: " << clamp_note << "\n";
    std::cout << fmt::format("route planned in {:.3f} s: {}\n", setup_seconds, plan->to_string());
    std::cout << "one-time set-up in this process: " << process_setup_costs().summary() << "\n";
    std::cout << fmt::format("settings: {} threads, {} tasks, direct I/O {}, compat {}\n", config.threads(),
                             format_size(config.task_size()), direct_io_name(config.direct_io()),
                             compat_mode_name(config.compat_mode()));
    std::cout << t.report.summary() << "\n\n" << t.report.table();
    if (verified) std::cout << "verify: " << (verified->ok ? "OK, " : "FAILED, ") << verified->detail << "\n";
  }
  if (verified && !verified->ok) {
    if (o.json) print_error("verify failed: " + verified->detail);
    return kExitMismatch;
  }
  return kExitOk;
}

}  // namespace ferry::cli
