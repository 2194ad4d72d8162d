// `ferry read`: read a file (or part of it) into host or GPU memory, report throughput and routes.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/host_memory.hpp"
#include "base/timing.hpp"
#include "cli/support/file_compare.hpp"
#include "cli/support/json_text.hpp"
#include "cli/support/progress.hpp"
#include "cli_common.hpp"
#include "ferry/remote.hpp"
#include "io_commands.hpp"
#include "platform/cuda/device_memory.hpp"

namespace ferry::cli {

using detail::DeviceMemory;
using detail::gib_per_s;
using detail::HostMemory;
using detail::now_ns;
using detail::seconds_since;

namespace {

// A local file that reports 0 bytes is empty, or has no size (/proc, /sys, a character device), and the File
// reads such a file to its end in one piece. Either way it is read into a buffer of kFirstUnsizedBytes; a read
// that fills its buffer is done again, from the offset, into one eight times larger, up to --size or, without
// it, kMostUnsizedBytes (/dev/zero never ends). An empty file reads 0 bytes at once.
constexpr std::uint64_t kFirstUnsizedBytes = 64 << 10;
constexpr std::uint64_t kMostUnsizedBytes = 1ull << 30;

// Where the read lands: host memory, or device memory of one GPU.
struct Destination {
  std::optional<HostMemory> host;
  std::optional<DeviceMemory> device;
  void* pointer = nullptr;
};

// `size` bytes of GPU `device`'s memory, or of host memory (device < 0).
//
// Host memory is not touched here: the read's first-touch page faults are part of the time it reports, as
// they are for any program that reads into fresh memory. (It was once touched first, MADV_POPULATE_WRITE,
// so that the throughput shown was the I/O's alone: that took as long as the read when idle, and 9.4 s of
// the 11-17 s a 4 GiB read took under memory pressure, while the command reported 1.6 s. The user waited
// for time no report showed: issue 48.) ferry-bench, which measures the I/O path, still touches its buffers
// first, and says so.
Result<Destination> allocate_destination(int device, std::uint64_t size, const std::string& path) {
  Destination d;
  if (device >= 0) {
    auto m = DeviceMemory::allocate(device, size);
    if (!m.ok()) return m.status();
    d.pointer = d.device.emplace(std::move(*m)).pointer();
    return d;
  }
  auto h = HostMemory::allocate(size);
  if (!h.ok()) {
    if (h.status().sys_errno() != ENOMEM) return h.status();
    // Memory, not disk space: the whole range asked for does not fit. Parts of it do.
    return Status(h.status().code(),
                  fmt::format("Could not allocate {} of host memory to read \"{}\" into (read it in parts with "
                              "--offset and --size, e.g. --size 1GiB)",
                              format_size(size), path),
                  ENOMEM, path);
  }
  d.pointer = d.host.emplace(std::move(*h)).data();
  return d;
}

}  // namespace

int run_read(const std::string& path, const std::string& offset_text, const std::string& size_text, bool verify,
             const CommonOptions& o) {
  const std::uint64_t command_start = now_ns();
  Config config = build_config(o);
  std::uint64_t offset = offset_text.empty() ? 0 : parse_size_option(offset_text, "--offset");

  auto file = File::open(path, "r", config);
  if (!file.ok()) return fail(file.status(), exit_status_for(file.status()));
  auto file_size = file->size();
  if (!file_size.ok()) return fail(file_size.status(), kExitFailure);
  const bool unsized = *file_size == 0 && !remote::is_remote_url(path);
  // Never more than the file holds from the offset: --size is an upper bound, and memory for bytes that do
  // not exist would be allocated (and filled) for nothing.
  const std::uint64_t available = *file_size > offset ? *file_size - offset : 0;
  std::optional<std::uint64_t> asked;
  if (!size_text.empty()) asked = parse_size_option(size_text, "--size");
  // The most this read may take: without a size, --size or kMostUnsizedBytes.
  std::uint64_t size = unsized ? asked.value_or(kMostUnsizedBytes) : std::min(asked.value_or(available), available);
  const bool clamped = !unsized && asked && *asked > size;
  std::string note;
  if (clamped) {
    note = fmt::format("--size {} is more than the file holds from offset {} ({} of {}): reading {}",
                       format_size(*asked), offset, format_size(available), format_size(*file_size),
                       format_size(size));
  }
  std::string target = o.device >= 0 ? fmt::format("GPU {}", o.device) : "host memory";

  // Set-up (loading CUDA and cuFile, registering the file, pinning bounce buffers) is timed apart from the
  // transfer, and so is the allocation of the destination: each is shown and reported, none is hidden.
  double prepare_seconds = 0, setup_seconds = 0, seconds = 0;
  unsigned reads = 0;
  std::optional<Destination> destination;
  std::optional<RoutePlan> plan;
  std::optional<Transfer> transfer;
  std::uint64_t capacity = unsized ? std::min(size, kFirstUnsizedBytes) : size;
  for (;; capacity = std::min(size, capacity * 8)) {
    std::uint64_t allocate_start = now_ns();
    destination.reset();
    auto d = allocate_destination(o.device, capacity, file->path());
    if (!d.ok()) return fail(d.status(), kExitFailure);
    destination.emplace(std::move(*d));
    prepare_seconds += seconds_since(allocate_start);

    std::uint64_t setup_start = now_ns();
    auto p = file->prepare(destination->pointer, capacity);
    setup_seconds += seconds_since(setup_start);
    if (!p.ok()) return fail(p.status(), exit_status_for(p.status(), config.require()));
    plan.emplace(std::move(*p));
    std::uint64_t start = now_ns();
    Future pending = file->pread(destination->pointer, capacity, offset);
    wait_with_progress(pending, "reading", capacity);
    auto result = pending.get();
    seconds += seconds_since(start);
    ++reads;
    if (!result.ok()) return fail(result.status(), exit_status_for(result.status(), config.require()));
    transfer.emplace(std::move(*result));
    // A short read is where the data ends.
    if (!unsized || transfer->bytes < capacity || capacity == size) break;
  }
  const Transfer& t = *transfer;
  if (unsized && t.bytes > 0) {
    note = t.bytes < capacity
               ? fmt::format("\"{}\" has no size (it reports 0 bytes): read to its end, {}", file->path(),
                             format_size(t.bytes))
           : asked ? fmt::format("\"{}\" has no size (it reports 0 bytes): read the {} --size asks for",
                                 file->path(), format_size(t.bytes))
                   : fmt::format("\"{}\" has no size (it reports 0 bytes) and did not end within {}: read that "
                                 "much (--size reads more)",
                                 file->path(), format_size(t.bytes));
    if (reads > 1) note += fmt::format(", in {} reads into a buffer grown each time the data filled it", reads);
  }
  std::string prepare = fmt::format("allocating {} of {}", format_size(capacity), target);
  if (o.device < 0) prepare += " (its pages are first touched by the read, and that is in its time)";

  std::optional<VerifyOutcome> verified;
  if (verify) {
    std::optional<HostMemory> copy;
    if (destination->device) {
      auto c = HostMemory::allocate(t.bytes);
      Status s = c.ok() ? destination->device->copy_to_host(c->data(), t.bytes) : c.status();
      if (!s.ok()) return fail(s, kExitFailure);
      copy.emplace(std::move(*c));
    }
    const std::uint8_t* got = copy ? copy->data() : destination->host->data();
    verified = compare_with_file(path, got, offset, t.bytes, 1);  // a plain sequential read
    if (verified->reference_failed) {
      return fail(Status(ErrorCode::io_error, fmt::format("--verify of \"{}\" compared nothing: {}", file->path(),
                                                           verified->detail), 0, file->path()),
                  kExitFailure);
    }
  }

  double gib_s = gib_per_s(t.bytes, seconds);
  const std::string setup_summary = process_setup_costs().summary();
  if (o.json) {
    nlohmann::json j;
    j["schema"] = kReadSchema;
    j["command"] = "read";
    j["path"] = file->path();  // a URL's display form: no credentials, no query
    j["offset"] = offset;
    j["requested_bytes"] = asked ? *asked : size;
    j["size_clamped"] = clamped;
    j["size_known"] = !unsized;
    j["bytes"] = t.bytes;
    j["seconds"] = seconds;
    j["reads"] = reads;
    j["setup_seconds"] = setup_seconds;
    j["prepare_seconds"] = prepare_seconds;
    j["prepare"] = prepare;
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
    if (!note.empty()) j["note"] = note;
    // From the start of the command to this document: the times above, verification, opening the file.
    j["wall_seconds"] = seconds_since(command_start);
    print_json(j);
  } else {
    std::cout << fmt::format("read {} of \"{}\" at offset {} into {} in {:.3f} s: {:.2f} GiB/s\n",
                             format_size(t.bytes), file->path(), offset, target, seconds, gib_s);
    if (!note.empty()) std::cout << "note: " << note << "\n";
    // Shown where it is more than the rounding of the times printed.
    if (prepare_seconds >= 0.0005) std::cout << fmt::format("before the read: {:.3f} s {}\n", prepare_seconds, prepare);
    std::cout << fmt::format("route planned in {:.3f} s: {}\n", setup_seconds, plan->to_string());
    std::cout << "one-time set-up in this process: " << (setup_summary.empty() ? "none" : setup_summary) << "\n";
    std::cout << fmt::format("settings: {}, {} tasks, direct I/O {}, compat {}\n", count_of(config.threads(), "thread"),
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
