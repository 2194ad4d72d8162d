// run_doctor: gathers the sections in order, predicts, probes, and decides the exit status; and the two
// ways to show a report (text for a terminal, JSON with a stable schema).
#include <algorithm>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/exit_status.hpp"
#include "doctor/doctor_internal.hpp"
#include "report/json_text.hpp"

namespace ferry {

const char* check_status_name(CheckStatus s) noexcept {
  switch (s) {
    case CheckStatus::ok: return "ok";
    case CheckStatus::warning: return "warning";
    case CheckStatus::problem: return "problem";
    case CheckStatus::not_applicable: return "not_applicable";
  }
  return "unknown";
}

const DoctorSection* DoctorReport::section(const std::string& id) const {
  for (const DoctorSection& s : sections) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

namespace {

constexpr std::size_t kWidth = 100;
constexpr const char* kSchema = "ferry.doctor/1";

const char* tag(CheckStatus s) {
  switch (s) {
    case CheckStatus::ok: return "[ ok ]";
    case CheckStatus::warning: return "[warn]";
    case CheckStatus::problem: return "[FAIL]";
    case CheckStatus::not_applicable: return "[ n/a]";
  }
  return "[ ?? ]";
}

// Appends `text` word-wrapped to kWidth: the first line after `first`, the others after `rest`.
void wrap(std::string& out, const std::string& text, const std::string& first, const std::string& rest) {
  std::string line = first;
  bool empty_line = true;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    if (!empty_line && line.size() + 1 + word.size() > kWidth) {
      out += line + "\n";
      line = rest;
      empty_line = true;
    }
    // A word longer than a whole line (a long path) is cut where the line ends.
    while (line.size() + (empty_line ? 0 : 1) + word.size() > kWidth) {
      std::size_t room = kWidth - line.size() - (empty_line ? 0 : 1);
      out += line + (empty_line ? "" : " ") + word.substr(0, room) + "\n";
      word.erase(0, room);
      line = rest;
      empty_line = true;
    }
    line += (empty_line ? "" : " ") + word;
    empty_line = false;
  }
  out += line + "\n";
}

nlohmann::json check_json(const DoctorCheck& k) {
  return {{"name", k.name}, {"status", check_status_name(k.status)}, {"summary", k.summary},
          {"evidence", k.evidence}, {"advice", k.advice}};
}

}  // namespace

std::string DoctorReport::to_text() const {
  std::string out;
  wrap(out, "verdict: " + verdict, "", "  ");
  wrap(out,
       fmt::format("ferry doctor: {} into {}{}{}", path.empty() ? std::string("(no PATH)") : "\"" + path + "\"",
                   prediction.target, prediction.device < 0 ? fmt::format(" (GPU {} is not usable)", device) : "",
                   require_gds ? ", direct route required" : ""),
       "", "  ");
  for (const DoctorSection& s : sections) {
    out += "\n" + fmt::format("{} {}\n", tag(s.status), s.title);
    for (const DoctorCheck& k : s.checks) {
      wrap(out, k.name + ": " + k.summary, "  " + std::string(tag(k.status)) + " ", "         ");
      for (const std::string& e : k.evidence) wrap(out, e, "         ", "           ");
      if (!k.advice.empty()) wrap(out, "fix: " + k.advice, "         ", "              ");
    }
  }
  out += "\nPREDICTION\n";
  wrap(out, prediction.explanation, "  ", "  ");
  if (!prediction.direct && !prediction.how_to_get_direct.empty()) {
    out += "  To get cuFile's direct route (nvfs or p2p), check in this order:\n";
    for (std::size_t i = 0; i < prediction.how_to_get_direct.size(); ++i) {
      wrap(out, prediction.how_to_get_direct[i], fmt::format("    {}. ", i + 1), "       ");
    }
  }
  if (prediction.strict_refusal) wrap(out, "require=gds: refused: " + *prediction.strict_refusal, "  ", "    ");
  if (probe) {
    out += "\nPROBE\n";
    if (probe->ran && probe->error.empty()) {
      double gib_s = probe->seconds > 0 ? static_cast<double>(probe->bytes) / probe->seconds / (1 << 30) : 0.0;
      wrap(out,
           fmt::format("read {} of {} into {} in {:.3f} s ({:.2f} GiB/s): {}", format_size(probe->bytes),
                       format_size(probe->requested_bytes), probe->target, probe->seconds, gib_s,
                       probe->report.summary()),
           "  ", "    ");
      if (probe->report.cufile) {
        const CuFileCounters& k = *probe->report.cufile;
        wrap(out,
             fmt::format("cuFile counters: nvfs={} posix={} p2p={} reads, {} bytes read, {} read errors",
                         k.nvfs_reads, k.posix_reads, k.p2p_reads, k.read_bytes, k.read_errors),
             "  ", "    ");
      }
    }
    wrap(out, std::string(probe->matches_prediction ? "[ ok ] " : "[FAIL] ") + probe->verdict, "  ", "         ");
  }
  out += "\nRESULT\n";
  wrap(out, fmt::format("exit {}: {}", exit_status, exit_reason), "  ", "    ");
  return out;
}

std::string DoctorReport::to_json() const {
  nlohmann::json j;
  j["schema"] = kSchema;
  j["path"] = path;
  j["device"] = device;
  j["require_gds"] = require_gds;
  j["sections"] = nlohmann::json::array();
  for (const DoctorSection& s : sections) {
    nlohmann::json checks = nlohmann::json::array();
    for (const DoctorCheck& k : s.checks) checks.push_back(check_json(k));
    j["sections"].push_back(
        {{"id", s.id}, {"title", s.title}, {"status", check_status_name(s.status)}, {"checks", checks}});
  }
  const DoctorPrediction& p = prediction;
  j["prediction"] = {{"target", p.target},
                     {"device", p.device},
                     {"request_bytes", p.request_bytes},
                     {"read_works", p.read_works},
                     {"route", p.route ? nlohmann::json(route_name(*p.route)) : nlohmann::json(nullptr)},
                     {"reason", p.reason ? reason_name(*p.reason) : p.error ? error_code_name(*p.error) : ""},
                     {"detail", p.detail},
                     {"explanation", p.explanation},
                     {"direct", p.direct},
                     {"how_to_get_direct", p.how_to_get_direct},
                     {"strict_refusal", p.strict_refusal ? nlohmann::json(*p.strict_refusal) : nlohmann::json(nullptr)}};
  if (probe) {
    j["probe"] = {{"ran", probe->ran},
                  {"target", probe->target},
                  {"requested_bytes", probe->requested_bytes},
                  {"bytes", probe->bytes},
                  {"seconds", probe->seconds},
                  {"error", probe->error.empty() ? nlohmann::json(nullptr) : nlohmann::json(probe->error)},
                  {"report", probe->ran && probe->error.empty() ? detail::report_json(probe->report)
                                                                : nlohmann::json(nullptr)},
                  {"matches_prediction", probe->matches_prediction},
                  {"verdict", probe->verdict}};
  } else {
    j["probe"] = nullptr;
  }
  j["exit_status"] = exit_status;
  j["exit_reason"] = exit_reason;
  j["verdict"] = verdict;
  return detail::json_dump(j);
}

namespace detail::doctor {

void set_warning(DoctorCheck& k, std::string summary, std::string evidence) {
  k.status = CheckStatus::warning;
  k.summary = std::move(summary);
  k.evidence.push_back(std::move(evidence));
}

CheckStatus worst_status(const std::vector<DoctorCheck>& checks) {
  auto rank = [](CheckStatus s) {
    switch (s) {
      case CheckStatus::not_applicable: return 0;
      case CheckStatus::ok: return 1;
      case CheckStatus::warning: return 2;
      case CheckStatus::problem: return 3;
    }
    return 0;
  };
  CheckStatus worst = CheckStatus::not_applicable;
  for (const DoctorCheck& k : checks) {
    if (rank(k.status) > rank(worst)) worst = k.status;
  }
  return worst;
}

namespace {

// The exit status and its reason, from the prediction and the probe.
std::pair<int, std::string> decide_exit(const DoctorContext& c, const DoctorReport& r) {
  const DoctorPrediction& p = r.prediction;
  if (!c.path.empty() && !c.file) {
    return {kDoctorExitFailure, "the file could not be opened: " + c.file_status.message()};
  }
  if (!c.config_status.ok()) {
    return {kDoctorExitFailure, "the FERRY_* environment does not parse: " + c.config_status.message()};
  }
  if (!p.read_works) {
    if (p.strict_refusal) {
      return {kDoctorExitRouteRefused, "the direct route is required and not available: " + p.detail};
    }
    return {kDoctorExitFailure, "a read as configured would fail: " + p.detail};
  }
  const bool probed = r.probe && r.probe->ran;
  if (probed && !r.probe->error.empty()) return {kDoctorExitFailure, "the probe read failed: " + r.probe->error};
  if (c.options.require_gds) {
    if (p.strict_refusal) {
      return {kDoctorExitRouteRefused, "--require-gds: the direct route is not available: " + *p.strict_refusal};
    }
    if (probed && !r.probe->matches_prediction) {
      return {kDoctorExitRouteRefused,
              "--require-gds: the probe read did not take the direct route: " + r.probe->verdict};
    }
    return {kDoctorExitOk, fmt::format("the direct route ({}) is available", route_name(*p.route))};
  }
  std::string reason = fmt::format("a read works (route {}){}", route_name(*p.route),
                                   p.direct ? "" : "; the direct route is not available (see the prediction)");
  if (probed && !r.probe->matches_prediction) reason += "; note: the probe did not match the prediction";
  return {kDoctorExitOk, reason};
}

// The verdict: the answer to "is anything wrong here?", from what the report found (decide_exit first).
std::string decide_verdict(const DoctorContext& c, const DoctorReport& r) {
  std::size_t warnings = 0;
  for (const DoctorSection& s : r.sections) {
    for (const DoctorCheck& k : s.checks) warnings += k.status == CheckStatus::warning ? 1 : 0;
  }
  const std::string more =
      warnings == 0 ? "" : fmt::format("; {} below", warnings == 1 ? "1 warning" : fmt::format("{} warnings", warnings));
  std::string gpu;  // what stands between this machine and a read into GPU N
  if (c.gpu_usable()) {
    gpu = fmt::format("GPU {}", c.options.device);
  } else if (c.cuda != nullptr) {
    gpu = fmt::format("no GPU {} (the driver reports {})", c.options.device,
                      c.devices.size() == 1 ? std::string("1 GPU") : fmt::format("{} GPUs", c.devices.size()));
  } else if (c.sysfs_gpus && !c.sysfs_gpus->gpus.empty()) {
    gpu = "NVIDIA GPUs on the PCI bus, but no usable CUDA driver";
  } else {
    gpu = "no GPU here";
  }
  if (r.exit_status != kDoctorExitOk) return gpu + ": " + r.exit_reason;
  const DoctorPrediction& p = r.prediction;
  if (!c.gpu_usable()) {
    // Exit 0 without a usable GPU: a read into host memory works, and nothing stands in its way.
    return fmt::format("{}: host reads work (route {}); nothing to fix for host memory{}", gpu, route_name(*p.route),
                       c.cuda == nullptr && gpu != "no GPU here" ? " (the CUDA section says what the GPUs need)"
                                                                 : "") +
           more;
  }
  if (p.direct) return fmt::format("{}: reads take cuFile's direct route ({}); nothing to fix{}", gpu, route_name(*p.route), more);
  return fmt::format("{}: reads work (route {}); cuFile's direct route is not available (the prediction lists what "
                     "it needs){}",
                     gpu, route_name(*p.route), more);
}

}  // namespace

Result<DoctorReport> run_doctor(const DoctorOptions& options, const DoctorEnvironment& env) {
  if (options.device < 0) {
    return Status(ErrorCode::invalid_argument, fmt::format("device must be a GPU ordinal >= 0, not {}", options.device));
  }
  if (options.probe && options.path.empty()) {
    return Status(ErrorCode::invalid_argument, "--probe needs a PATH to read");
  }
  DoctorContext c;
  c.options = options;
  c.env = env;
  c.gpu = env.gpu != nullptr ? env.gpu : &process_gpu_platform();
  c.path = options.path;
  if (options.config) {
    c.config = *options.config;
  } else if (auto config = default_config(); config.ok()) {
    c.config = *config;
  } else {
    c.config_status = config.status();  // defaults are used; the settings section reports the problem
  }

  DoctorReport r;
  r.path = options.path;
  r.device = options.device;
  r.require_gds = options.require_gds;
  r.sections.push_back(cuda_section(c));
  r.sections.push_back(cufile_section(c));
  r.sections.push_back(nvidia_fs_section(c));
  DoctorSection file = file_section(c);
  r.sections.push_back(platform_section(c));
  r.sections.push_back(std::move(file));
  r.sections.push_back(settings_section(c));
  r.prediction = predict(c);
  if (options.probe) r.probe = run_probe(c, r.prediction);
  std::tie(r.exit_status, r.exit_reason) = decide_exit(c, r);
  r.verdict = decide_verdict(c, r);
  return r;
}

}  // namespace detail::doctor

Result<DoctorReport> run_doctor(const DoctorOptions& options) {
  return detail::doctor::run_doctor(options, detail::doctor::DoctorEnvironment{});
}

std::string doctor_json(const std::string& path, int device, bool probe) {
  DoctorOptions o;
  o.path = path;
  o.device = device;
  o.probe = probe;
  auto r = run_doctor(o);
  if (r.ok()) return r->to_json();
  nlohmann::json j;
  j["schema"] = kSchema;
  j["error"] = {{"code", error_code_name(r.status().code())}, {"message", r.status().message()}};
  j["exit_status"] = detail::exit_status_for(r.status());
  return detail::json_dump(j);
}

}  // namespace ferry
