// `ferry doctor [PATH]`: checks the platform, predicts the route a read of PATH into GPU N takes (and why),
// and with --probe proves it with a real small read. Thin: everything is ferry::run_doctor.
#include "doctor_command.hpp"

#include <iostream>

#include "cli_common.hpp"
#include "ferry/doctor.hpp"

namespace ferry::cli {

const char* const kDoctorFooter = R"(
Exit status: 0 the requested route is available (default: a read of PATH into GPU N works, by any route;
with --require-gds: cuFile's direct route nvfs or p2p); 1 a read as configured would fail (PATH cannot be
opened, compat mode off without a usable cuFile, the probe read failed, a FERRY_* variable does not
parse); 2 bad command line (--probe without PATH, unknown option); 4 --require-gds and the direct route
is not available (or the probe read went another way).
Without a usable GPU the prediction is for host memory (route host). See docs/doctor.md.)";

void add_doctor_options(CLI::App& cmd, DoctorCommandOptions& o) {
  cmd.add_option("PATH", o.path, "File to check (optional: without it only the platform is checked)");
  cmd.add_option("--device", o.device, "GPU ordinal the read would go to (default 0)")->check(gpu_ordinal("GPU 0"));
  cmd.add_flag("--probe", o.probe, "Prove the prediction with a real read of up to 16 MiB of PATH (needs PATH)");
  cmd.add_flag("--require-gds", o.require_gds, "Exit 4 unless cuFile's direct route (nvfs or p2p) is available");
  cmd.add_option("--compat", o.compat, "cuFile use for device memory: auto, on (never), off (always)")
      ->check(not_empty());
  cmd.add_flag("--json", o.json, "Print one JSON object (schema ferry.doctor/1) instead of text");
  cmd.footer(kDoctorFooter);
}

int run_doctor_command(const DoctorCommandOptions& o) {
  if (o.probe && o.path.empty()) throw UsageError{"--probe needs a PATH to read: ferry doctor PATH --probe"};
  if (o.device < 0) throw UsageError{"--device: cannot use a negative GPU ordinal"};
  DoctorOptions options;
  options.path = o.path;
  options.device = o.device;
  options.probe = o.probe;
  options.require_gds = o.require_gds;
  if (!o.compat.empty()) {
    CommonOptions common;
    common.compat = o.compat;
    try {
      options.config = build_config(common);  // throws UsageError for a bad --compat
    } catch (const SettingsError&) {
      // A bad FERRY_* variable: the report's settings section names it, and the doctor exits 1.
    }
  }
  auto report = run_doctor(options);
  if (!report.ok()) return fail(report.status(), exit_status_for(report.status()));
  // The report's JSON comes from the library's writer (cli/support/json_text.hpp), as every command's.
  std::cout << (o.json ? report->to_json() + "\n" : report->to_text());
  if (!o.json && report->exit_status != kDoctorExitOk) print_error(report->exit_reason);
  return report->exit_status;
}

}  // namespace ferry::cli
