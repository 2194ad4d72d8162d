// ferry/doctor.hpp: `ferry doctor` as a library call: a check of the whole stack that ends with the route a
// read of PATH into GPU N will take, why, and what would give the direct route, asked of the same router a
// real read asks. Each check, the JSON schema and the exit statuses: docs/doctor.md.
// Thread safety: run_doctor() may be called from any thread; it loads CUDA and cuFile as a read would.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ferry/config.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry {

/// The outcome of one check. `problem` means a read as configured would fail or the direct route is
/// blocked by it; `warning` means it works but something deserves attention.
enum class CheckStatus { ok, warning, problem, not_applicable };
/// "ok", "warning", "problem", "not_applicable" (the spelling in JSON).
const char* check_status_name(CheckStatus s) noexcept;

/// Exit statuses of `ferry doctor` (and DoctorReport::exit_status).
inline constexpr int kDoctorExitOk = 0;            // the requested route is available (default: a read works)
inline constexpr int kDoctorExitFailure = 1;       // a read as configured would fail, or the doctor could not check
inline constexpr int kDoctorExitRouteRefused = 4;  // require_gds and the direct route is not available

struct DoctorOptions {
  std::string path;          // the file to check; empty: platform checks only (no file checks, no probe)
  int device = 0;            // GPU ordinal the read would go to (host memory when no GPU is usable)
  bool probe = false;        // do a real small read to prove the prediction (needs `path`)
  bool require_gds = false;  // exit 4 unless cuFile's direct route (nvfs or p2p) is available
  /// The settings a read would use; nullopt: default_config() (FERRY_* environment over defaults).
  std::optional<Config> config;
};

struct DoctorCheck {
  std::string name;     // "driver library", "GPU 0", "handle registration", ...
  CheckStatus status = CheckStatus::not_applicable;
  std::string summary;  // one line
  std::vector<std::string> evidence;  // what was read, where from
  std::string advice;   // what to do about it; empty when nothing
};

struct DoctorSection {
  std::string id;     // "cuda", "cufile", "nvidia_fs", "platform", "file", "settings"
  std::string title;  // "CUDA", "cuFile", "nvidia-fs", "Platform", "File", "Ferry settings"
  CheckStatus status = CheckStatus::not_applicable;  // the worst of its checks
  std::vector<DoctorCheck> checks;
};

struct DoctorPrediction {
  std::string target;            // "GPU 0" or "host memory"
  int device = -1;               // GPU ordinal, -1 for host memory
  std::uint64_t request_bytes = 0;  // the size the router was asked about (the file's size)
  bool read_works = false;       // the router accepted the request
  std::optional<Route> route;    // the decision's route; empty when the read would fail
  std::optional<Reason> reason;  // the decision's reason; empty when the read would fail
  std::optional<ErrorCode> error;  // why the read would fail (then route and reason are empty)
  std::string detail;            // the router's detail, or the error message
  std::string explanation;       // "A read of "PATH" into GPU 0 will take route staged, because ..."
  bool direct = false;           // route is nvfs or p2p
  std::vector<std::string> how_to_get_direct;  // steps, in order; empty when the route is direct already
  std::optional<std::string> strict_refusal;   // require_gds: the router's refusal, when it refused
};

struct DoctorProbe {
  bool ran = false;
  std::string target;            // "GPU 0" or "host memory"
  std::uint64_t requested_bytes = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  std::string error;             // the read's error; empty when it worked
  Report report;                 // routes, reasons and cuFile counters of the probe read
  bool matches_prediction = false;
  std::string verdict;           // one sentence
};

struct DoctorReport {
  std::string path;
  int device = 0;
  bool require_gds = false;
  std::vector<DoctorSection> sections;
  DoctorPrediction prediction;
  std::optional<DoctorProbe> probe;
  int exit_status = kDoctorExitOk;
  std::string exit_reason;       // one sentence: why exit_status is what it is
  /// One line, first in the text, from the checks, the prediction and the exit status: "no GPU here: host
  /// reads work (route host); nothing to fix for host memory", "GPU 0: reads take cuFile's direct route
  /// (nvfs); nothing to fix", or what is wrong.
  std::string verdict;

  const DoctorSection* section(const std::string& id) const;
  /// For people: the verdict, then sections top to bottom, one line per check with a status tag, indented
  /// evidence, the prediction in plain words, then the probe. Lines fit 100 columns.
  std::string to_text() const;
  /// Stable schema "ferry.doctor/1": see docs/doctor.md.
  std::string to_json() const;
};

/// Runs every check and the prediction (and the probe when asked). A PATH that cannot be opened is a
/// `problem` in the report with exit_status 1, not an error. Errors: invalid_argument for a negative
/// device or `probe` without `path`.
[[nodiscard]] Result<DoctorReport> run_doctor(const DoctorOptions& options);

/// run_doctor(path, device, probe) as JSON (DoctorReport::to_json), or {"schema": ..., "error": {...}}
/// when it could not run. For bindings; never throws.
std::string doctor_json(const std::string& path, int device, bool probe);

}  // namespace ferry
