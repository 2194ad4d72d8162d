// `ferry read`: read a file (or part of it) into host or GPU memory, report throughput and routes.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "elapsed_time.hpp"
#include "ferry/remote.hpp"
#include "ferry_tooling/device_memory.hpp"
#include "ferry_tooling/json_text.hpp"
#include "file_compare.hpp"
#include "host_buffer.hpp"

namespace ferry::cli {
int run_read(const std::string& path, const std::string& offset_text, const std::string& size_text, bool verify,
             const CommonOptions& o) {
  Config config = build_config(o);
  std::uint64_t offset = offset_text.empty() ? 0 : parse_size_option(offset_text, "--offset");

  auto file = File::open(path, "r", config);
  if (!file.ok()) {
    return fail(file.status(), exit_code_for(file.status()));
  }
  auto file_size = file->size();
  if (!file_size.ok()) {
    return fail(file_size.status(), kExitFailure);
  }
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
  HostBuffer host;
  std::optional<tooling::DeviceMemory> device;
  void* destination = nullptr;
  if (o.device >= 0) {
    auto d = tooling::DeviceMemory::allocate(o.device, size);
    if (!d.ok()) {
      return fail(d.status(), kExitFailure);
    }
    device.emplace(std::move(*d));
    destination = device->pointer();
  } else {
    // A remote object's size is what its server claims: memory for it is made as the bytes arrive.
    host = allocate_host(size, !remote::is_remote_url(path));
    if (!host) {
      return fail(Status::from_errno(ENOMEM, fmt::format("could not allocate {} of host memory", format_size(size))),
                  kExitFailure);
    }
    destination = host.get();
  }

  // One-time work (loading CUDA and cuFile, registering the file, pinning bounce buffers) is timed apart
  // from the transfer, so the throughput shown is the transfer's and the set-up cost is not hidden.
  std::uint64_t setup_start = now_ns();
  auto plan = file->prepare(destination, size);
  double setup_seconds = seconds_since(setup_start);
  if (!plan.ok()) {
    return fail(plan.status(),
                plan.status().code() == ErrorCode::failed_precondition ? kExitRouteRefused : kExitFailure);
  }
  std::uint64_t start = now_ns();
  Future pending = file->pread(destination, size, offset);
  wait_with_progress(pending, "reading", size);
  auto result = pending.get();
  double seconds = seconds_since(start);
  if (!result.ok()) {
    return fail(result.status(), o.require_gds && result.status().code() == ErrorCode::failed_precondition
                                     ? kExitRouteRefused
                                     : kExitFailure);
  }
  const Transfer& t = *result;

  std::optional<VerifyOutcome> verified;
  if (verify) {
    const std::uint8_t* got = host.get();
    HostBuffer copy;
    if (device) {
      copy = allocate_host(t.bytes);
      Status s = device->copy_to_host(copy.get(), t.bytes);
      if (!s.ok()) {
        return fail(s, kExitFailure);
      }
      got = copy.get();
    }
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
    j["report"] = tooling::report_json(t.report);
    // Everything this process set up once (CUDA, contexts, cuFile, pinned buffers, threads), step by step.
    j["setup_costs"] = nlohmann::json::parse(process_setup_costs().to_json());
    if (verified) j["verify"] = {{"ok", verified->ok}, {"detail", verified->detail}};
    if (clamped) j["note"] = clamp_note;
    std::cout << tooling::json_dump(j) << "\n";
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
