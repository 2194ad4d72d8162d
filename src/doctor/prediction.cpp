// The prediction and its proof. The prediction asks route_for() — the decision every real request makes —
// about the opened file and a real destination buffer (device memory of GPU N, or host memory without a
// GPU), so it cannot drift from what a read does. The probe then does such a read and compares the route
// report (and cuFile's counters) with the prediction.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "platform/cufile/cufile_env.hpp"

#include "base/host_memory.hpp"
#include "base/timing.hpp"
#include "doctor/doctor_internal.hpp"
#include "file/file_state.hpp"
#include "file/open_options.hpp"
#include "file/route_selection.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/device_memory.hpp"
#include "platform/cufile/cufile_errors.hpp"

namespace ferry::detail::doctor {
namespace {

constexpr std::uint64_t kProbeBytes = 16ull << 20;

bool is_direct(Route r) { return r == Route::nvfs || r == Route::p2p; }

// The facts a read would gather, for the case without a file (platform-level prediction): registration is
// assumed to succeed, as it would on a supported file with a udev record.
CuFileFacts platform_facts(const DoctorContext& c) {
  CuFileFacts f;
  f.forced_compat = cufile_forced_compat(c.driver != nullptr ? c.cufile : nullptr).forced;
  if (c.cufile == nullptr) {
    f.library = c.cufile_status;
  } else if (c.driver == nullptr) {
    f.driver = c.driver_status.ok() ? Status(ErrorCode::unavailable, "cuFile's driver was not opened")
                                    : c.driver_status;
  } else {
    f.nvidia_fs_loaded = c.driver->properties().nvidia_fs_loaded;
    f.p2pdma_supported = c.driver->properties().p2pdma_supported;
  }
  return f;
}

// Why, in words a user can act on, for the decision's reason.
std::string because(const DoctorContext& c, const Decision& d) {
  switch (d.reason) {
    case Reason::buffer_is_host_memory:
      if (!c.gpu_usable()) {
        // The loader's error is quoted once, in the CUDA section.
        std::string why = c.cuda == nullptr ? "no usable CUDA driver: the CUDA section says why"
                                            : fmt::format("the driver reports no GPU {}", c.options.device);
        return fmt::format("no GPU is usable, so the data can only go to host memory ({})", why);
      }
      return "the destination is host memory";
    case Reason::compat_mode_on:
      return "compat mode is on (FERRY_COMPAT_MODE=on or --compat on), which keeps device reads off cuFile";
    case Reason::below_gds_threshold:
      return fmt::format("the request is smaller than gds_threshold ({}), which is not worth cuFile's set-up",
                         d.detail);
    case Reason::cufile_library_missing:
      return "libcufile could not be loaded (" + d.detail + ")";
    case Reason::cufile_driver_open_failed:
      return "cuFile's driver did not open (" + d.detail + ")";
    case Reason::cufile_handle_register_failed: {
      std::string out = "cuFile cannot register the file (" + d.detail + ")";
      if (c.udev_record_missing()) {
        out += fmt::format(". The cause: block device {}:{} has no udev record with ID_FS_USAGE ({}), which "
                           "cuFile looks up to register a file",
                           c.dev_major, c.dev_minor, c.udev->record_path);
      }
      return out;
    }
    case Reason::nvidia_fs_not_loaded:
      return "nvidia-fs is not loaded and P2PDMA is not available, so cuFile could only use its POSIX "
             "compatibility path, which is no faster than Ferry's staged route (" + d.detail + ")";
    case Reason::cufile_forced_compat:
      return "CUFILE_FORCE_COMPAT_MODE makes cuFile use only its POSIX path";
    case Reason::managed_memory:
      return "the buffer is managed memory, which cuFile does not take";
    case Reason::source_not_a_file:
      return "the source is not a local file, and cuFile reads only through a file descriptor";
    case Reason::compat_mode_off:
      if (d.route == Route::cufile_posix) {
        return "compat mode is off, so the read goes to cuFile, and cuFile has no direct route here (" + d.detail +
               "), so it uses its POSIX compatibility path";
      }
      return "compat mode is off (cuFile required) and cuFile's direct route is available (" + d.detail + ")";
    case Reason::gds_available:
      return "cuFile can move the data directly (" + d.detail + ") and the file registered";
    case Reason::cufile_stats:
    case Reason::cufile_unaligned_edge:
    case Reason::batch_pieces:
      break;
  }
  return std::string(reason_text(d.reason)) + (d.detail.empty() ? "" : ": " + d.detail);
}

// Every blocker between this read and cuFile's direct route, in the order they would have to be removed.
std::vector<std::string> steps_to_direct(const DoctorContext& c, bool below_threshold) {
  std::vector<std::string> steps;
  if (!c.gpu_usable()) {
    steps.push_back(c.cuda == nullptr
                        ? "Make a GPU usable: install the NVIDIA driver (the CUDA section says what is missing); in "
                          "a container, pass the GPUs in."
                        : fmt::format("Pick an existing GPU with --device (there is no GPU {}).", c.options.device));
  }
  if (c.config.compat_mode() == CompatMode::on) {
    steps.push_back("Set FERRY_COMPAT_MODE=auto (or pass --compat auto): compat mode on never uses cuFile.");
  }
  if (below_threshold) {
    steps.push_back(fmt::format("Read at least gds_threshold ({}) per request, or lower FERRY_GDS_THRESHOLD.",
                                format_size(c.config.gds_threshold())));
  }
  if (c.cufile == nullptr) {
    steps.push_back("Install cuFile (GPUDirect Storage's libcufile.so.0) where the loader finds it.");
  } else if (c.driver_tried && c.driver == nullptr) {
    steps.push_back("Get cuFileDriverOpen to succeed: " + c.driver_status.message());
  }
  if (c.file && c.file->direct_io_available() == false) {
    steps.push_back("Put the file on a file system that accepts O_DIRECT (cuFile's direct path needs it).");
  }
  if (c.registration_tried && !c.registration.ok()) {
    steps.push_back(c.udev_record_missing() ? "Give cuFile the udev record it needs. " + udev_fix_advice(c)
                                            : "Get cuFileHandleRegister to succeed on this file: " +
                                                  c.registration.message());
  }
  if (cufile_forced_compat(c.driver != nullptr ? c.cufile : nullptr).forced) steps.push_back("Unset CUFILE_FORCE_COMPAT_MODE.");
  bool direct_possible = c.driver != nullptr ? c.driver->properties().direct_route_possible()
                                             : (c.nvidia_fs && c.nvidia_fs->module_loaded);
  if (!direct_possible) steps.push_back(nvidia_fs_advice());
  return steps;
}

std::string strict_refusal_for_file(DoctorContext& c, const void* buffer) {
  Config strict = c.config;
  strict.set_require(Requirement::gds);
  OpenOptions o;
  o.gpu = c.gpu;
  auto f = open_file(c.path, "r", strict, o);
  if (!f.ok()) return f.status().message();
  auto plan = route_for(FileState::of(*f), buffer, c.file_size, BufferQuery::stand_in);
  if (!plan.ok()) return plan.status().message();
  if (!is_direct(plan->decision.route)) {
    return fmt::format("the route would be {} ({})", route_name(plan->decision.route), reason_text(plan->decision.reason));
  }
  return {};
}

}  // namespace

DoctorPrediction predict(DoctorContext& c) {
  DoctorPrediction p;
  const bool gpu = c.gpu_usable();
  p.device = gpu ? c.options.device : -1;
  p.target = gpu ? fmt::format("GPU {}", c.options.device) : std::string("host memory");
  const std::string subject =
      c.path.empty() ? "A read" : fmt::format("A read of \"{}\" ({})", c.path, format_size(c.file_size));

  if (!c.path.empty() && !c.file) {
    p.error = c.file_status.code();
    p.detail = c.file_status.message();
    p.explanation = fmt::format("A read of \"{}\" cannot work: {}", c.path, c.file_status.to_string());
    return p;
  }

  std::optional<DeviceMemory> device_memory;
  // The stand-in destination: one page of host memory, or (below) of the GPU's.
  auto host_page = HostMemory::allocate(1);
  if (!host_page.ok()) {
    p.error = host_page.status().code();
    p.detail = host_page.status().message();
    p.explanation = fmt::format("{} cannot be predicted: {}", subject, host_page.status().message());
    return p;
  }
  const void* buffer = host_page->data();
  if (gpu) {
    auto m = DeviceMemory::allocate(*c.cuda, c.options.device, 4096);
    if (!m.ok()) {
      p.error = m.status().code();
      p.detail = m.status().message();
      p.explanation = fmt::format("{} into {} cannot work: device memory could not be allocated: {}", subject,
                                  p.target, m.status().message());
      return p;
    }
    device_memory.emplace(std::move(*m));
    buffer = device_memory->pointer();
  }

  Result<Decision> decision = Status(ErrorCode::internal, "not decided");
  if (c.file) {
    p.request_bytes = c.file_size;
    auto plan = route_for(FileState::of(*c.file), buffer, c.file_size, BufferQuery::stand_in);
    decision = plan.ok() ? Result<Decision>(plan->decision) : Result<Decision>(plan.status());
  } else {
    // No PATH: the router's answer for a typical large request on a file cuFile can register.
    p.request_bytes = std::max<std::uint64_t>(kProbeBytes, c.config.gds_threshold());
    RouteQuery q;
    q.buffer = gpu ? BufferKind{MemoryKind::device, c.options.device} : BufferKind{};
    q.size = p.request_bytes;
    q.compat = c.config.compat_mode();
    q.gds_threshold = c.config.gds_threshold();
    q.require = c.config.require();
    q.path = "(no file)";
    decision = decide(q, needs_cufile(q) ? platform_facts(c) : CuFileFacts{});
  }

  if (!decision.ok()) {
    p.error = decision.status().code();
    p.detail = decision.status().message();
    p.explanation = fmt::format("{} into {} will fail before any I/O: {}", subject, p.target, p.detail);
    if (decision.status().code() == ErrorCode::failed_precondition) p.strict_refusal = p.detail;
  } else {
    const Decision& d = *decision;
    p.read_works = true;
    p.route = d.route;
    p.reason = d.reason;
    p.detail = d.detail;
    p.direct = is_direct(d.route);
    p.explanation = fmt::format("{} into {} will take route {}, because {}.", subject, p.target, route_name(d.route),
                                because(c, d));
    if (is_cufile_route(d.route)) {
      p.explanation += " (cuFile makes the final choice per I/O; --probe shows its counters.)";
    }
    if (c.path.empty()) {
      p.explanation += " No PATH was given: this assumes a file cuFile can register; give a PATH to check yours.";
    }
  }
  if (!p.direct) {
    bool below = c.config.compat_mode() == CompatMode::automatic && p.request_bytes < c.config.gds_threshold();
    p.how_to_get_direct = steps_to_direct(c, below);
  }
  if (c.options.require_gds && !p.strict_refusal) {
    std::string refusal;
    if (c.file) {
      refusal = strict_refusal_for_file(c, buffer);
    } else if (!p.direct) {
      refusal = p.read_works ? fmt::format("the route would be {}", route_name(*p.route)) : p.detail;
    }
    if (!refusal.empty()) p.strict_refusal = refusal;
  }
  return p;
}

DoctorProbe run_probe(DoctorContext& c, const DoctorPrediction& prediction) {
  DoctorProbe r;
  const bool gpu = c.gpu_usable();
  r.target = gpu ? fmt::format("GPU {}", c.options.device) : std::string("host memory");
  if (!c.file) {
    r.verdict = "not run: the file could not be opened";
    return r;
  }
  r.requested_bytes = std::min(c.file_size, std::max(kProbeBytes, c.config.gds_threshold()));
  std::optional<DeviceMemory> device_memory;
  std::optional<HostMemory> host_memory;
  void* buffer = nullptr;
  Status allocated;
  if (gpu) {
    auto m = DeviceMemory::allocate(*c.cuda, c.options.device, r.requested_bytes);
    allocated = m.status();
    if (m.ok()) buffer = device_memory.emplace(std::move(*m)).pointer();
  } else {
    auto m = HostMemory::allocate(r.requested_bytes);
    allocated = m.status();
    if (m.ok()) buffer = host_memory.emplace(std::move(*m)).data();
  }
  if (!allocated.ok()) {
    r.error = allocated.to_string();
    r.verdict = "not run: " + r.error;
    return r;
  }
  r.ran = true;
  auto start = detail::now_ns();
  auto result = c.file->pread(buffer, r.requested_bytes, 0).get();
  r.seconds = detail::seconds_since(start);
  if (!result.ok()) {
    r.error = result.status().to_string();
    r.matches_prediction = !prediction.read_works;
    r.verdict = prediction.read_works ? "the read failed although the prediction said it would work: " + r.error
                                      : "the read failed, as predicted: " + r.error;
    return r;
  }
  r.bytes = result->bytes;
  r.report = result->report;
  std::uint64_t total = r.report.total_ops();
  if (total == 0) {
    r.matches_prediction = true;
    r.verdict = "the file is empty: no operation to prove the route with";
    return r;
  }
  const std::optional<Route> predicted = prediction.route;
  std::uint64_t on_route = predicted ? r.report.at(*predicted).ops : 0;
  // A cuFile read's unaligned edges go through a bounce buffer by design; they do not contradict it.
  std::uint64_t edges = 0;
  if (predicted && is_cufile_route(*predicted)) {
    for (const auto& rc : r.report.reasons) edges += rc.reason == Reason::cufile_unaligned_edge ? rc.ops : 0;
  }
  r.matches_prediction = prediction.read_works && on_route > 0 && on_route + edges == total;
  if (r.matches_prediction) {
    r.verdict = edges == 0 ? fmt::format("proved: all {} operation(s) took route {}", total, route_name(*predicted))
                           : fmt::format("proved: {} of {} operation(s) took route {}, and the {} unaligned edge(s) "
                                         "went through a bounce buffer",
                                         on_route, total, route_name(*predicted), edges);
    if (r.report.cufile) r.verdict += ", and cuFile's counters agree (" + cufile_counters_text(*r.report.cufile) + ")";
  } else {
    r.verdict = fmt::format("differs from the prediction ({}): {}",
                            prediction.route ? route_name(*prediction.route) : "fail", r.report.summary());
  }
  return r;
}

}  // namespace ferry::detail::doctor
