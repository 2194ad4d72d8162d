// decide(): the policy table of docs/routes.md, in code.
#include "route/router.hpp"

#include <fmt/format.h>

namespace ferry::detail {
namespace {

Status refuse_strict(const RouteQuery& q, const std::string& why) {
  return Status(ErrorCode::failed_precondition,
                fmt::format("require=gds: the direct GPUDirect Storage route is impossible for \"{}\": {}; "
                            "no I/O was done",
                            q.path, why),
                0, std::string(q.path));
}

Status refuse_compat_off(const RouteQuery& q, const std::string& why) {
  return Status(ErrorCode::unavailable, fmt::format("compat mode off requires cuFile for \"{}\", but {}", q.path, why),
                0, std::string(q.path));
}

// The first cuFile step that failed, as (reason, detail); nullopt when cuFile is usable for this file.
std::optional<std::pair<Reason, std::string>> cufile_blocker(const CuFileFacts& f) {
  if (!f.library.ok()) return std::pair{Reason::cufile_library_missing, f.library.message()};
  if (!f.driver.ok()) return std::pair{Reason::cufile_driver_open_failed, f.driver.message()};
  if (!f.handle.ok()) return std::pair{Reason::cufile_handle_register_failed, f.handle.message()};
  return std::nullopt;
}

// The detail of below_gds_threshold is the threshold, not the request's size: a report keeps one row per
// detail, and a data loader's reads of many sizes would each add one (and each merge would search them all).
// Short enough for std::string's inline storage (thresholds below 1 GB), so that the decision and the report
// row of every small request copy it without an allocation; written once per thread and threshold.
const std::string& threshold_detail(std::uint64_t threshold) {
  thread_local std::uint64_t written_for = 0;
  thread_local std::string detail;
  if (detail.empty() || written_for != threshold) {
    detail = fmt::format("{} bytes", threshold);
    written_for = threshold;
  }
  return detail;
}

Route provisional_cufile_route(const CuFileFacts& f) {
  if (f.forced_compat) return Route::cufile_posix;
  if (f.nvidia_fs_loaded) return Route::nvfs;
  if (f.p2pdma_supported) return Route::p2p;
  return Route::cufile_posix;
}

}  // namespace

bool needs_cufile(const RouteQuery& q) {
  if (q.buffer.kind != MemoryKind::device) return false;
  if (q.compat == CompatMode::on) return false;
  if (q.require == Requirement::gds || q.compat == CompatMode::off) return true;
  return q.size >= q.gds_threshold;
}

namespace {

Result<Decision> decide_one_request(const RouteQuery& q, const CuFileFacts& f);

}  // namespace

Result<Decision> decide(const RouteQuery& q, const CuFileFacts& f) {
  FERRY_ASSIGN_OR_RETURN(Decision d, decide_one_request(q, f));
  if (!q.pieces || !is_cufile_route(d.route)) return d;
  if (q.require == Requirement::gds) {
    return Status(ErrorCode::failed_precondition,
                  fmt::format("require=gds: a batch into GPU memory from \"{}\" takes the staged route (its pieces "
                              "are packed into bounce buffers; cuFile reads one request at a time); no I/O was done",
                              q.path),
                  0, std::string(q.path));
  }
  return Decision{Route::staged, Reason::batch_pieces, ""};
}

namespace {

Result<Decision> decide_one_request(const RouteQuery& q, const CuFileFacts& f) {
  const bool strict = q.require == Requirement::gds;
  if (q.buffer.is_host()) {
    if (strict) return refuse_strict(q, "the buffer is host memory");
    return Decision{Route::host, Reason::buffer_is_host_memory, memory_kind_name(q.buffer.kind)};
  }
  if (q.buffer.kind == MemoryKind::managed) {
    if (strict) return refuse_strict(q, "the buffer is managed memory, which cuFile does not take");
    return Decision{Route::staged, Reason::managed_memory, ""};
  }
  if (q.compat == CompatMode::on) {
    if (strict) return refuse_strict(q, "compat mode is on (FERRY_COMPAT_MODE=on forbids cuFile)");
    return Decision{Route::staged, Reason::compat_mode_on, ""};
  }
  // Strict mode wants cuFile for every size; otherwise small requests are not worth its set-up.
  if (!strict && q.compat == CompatMode::automatic && q.size < q.gds_threshold) {
    return Decision{Route::staged, Reason::below_gds_threshold, threshold_detail(q.gds_threshold)};
  }
  if (f.source_without_descriptor) {
    const std::string why = "cuFile reads only local files, and this source has no file descriptor";
    if (strict) return refuse_strict(q, why);
    if (q.compat == CompatMode::off) return refuse_compat_off(q, why);
    return Decision{Route::staged, Reason::source_not_a_file, why};
  }
  if (auto blocker = cufile_blocker(f)) {
    if (strict) return refuse_strict(q, blocker->second);
    if (q.compat == CompatMode::off) return refuse_compat_off(q, blocker->second);
    return Decision{Route::staged, blocker->first, blocker->second};
  }
  const bool direct = !f.forced_compat && (f.nvidia_fs_loaded || f.p2pdma_supported);
  if (!direct) {
    Reason why = f.forced_compat ? Reason::cufile_forced_compat : Reason::nvidia_fs_not_loaded;
    std::string detail = f.forced_compat                     ? "CUFILE_FORCE_COMPAT_MODE=true"
                         : !f.checked_without_cufile.empty() ? f.checked_without_cufile
                                                             : "cuFile reports nvidia-fs version 0 and no PCI P2PDMA support";
    if (strict) return refuse_strict(q, std::string(reason_text(why)) + ": " + detail);
    if (q.compat == CompatMode::automatic) return Decision{Route::staged, why, detail};
    return Decision{Route::cufile_posix, Reason::compat_mode_off, std::string(reason_text(why))};
  }
  Reason reason = q.compat == CompatMode::off ? Reason::compat_mode_off : Reason::gds_available;
  return Decision{provisional_cufile_route(f), reason,
                  f.nvidia_fs_loaded ? "nvidia-fs loaded" : "PCI P2PDMA supported"};
}

}  // namespace

}  // namespace ferry::detail
