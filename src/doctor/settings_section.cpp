// The settings section: every Ferry setting in effect for the predicted read, with where its value came
// from (default, FERRY_* environment, or code/command line), and warnings for settings that keep reads
// off cuFile.
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include <fmt/format.h>

#include "base/process_limits.hpp"
#include "platform/cufile/cufile_env.hpp"

#include "doctor/doctor_internal.hpp"

namespace ferry::detail::doctor {

DoctorSection settings_section(DoctorContext& c) {
  DoctorSection s{"settings", "Ferry settings", CheckStatus::not_applicable, {}};
  if (!c.config_status.ok()) {
    s.checks.push_back({"environment", CheckStatus::problem, "a FERRY_* variable does not parse: reads would fail",
                        {c.config_status.message()}, "Fix or unset the variable named above."});
  }
  for (const SettingInfo& row : settings_table()) {
    DoctorCheck k{row.name, CheckStatus::ok, "", {}, ""};
    std::string value = c.config.get(row.name);
    if (row.name == "task_size" || row.name == "gds_threshold" || row.name == "bounce_buffer_size") {
      std::uint64_t bytes = std::strtoull(value.c_str(), nullptr, 10);
      value = fmt::format("{} ({} bytes)", format_size(bytes), bytes);
    }
    SettingSource src = c.config.source(row.name);
    k.summary = fmt::format("{} [{}{}]", value, setting_source_name(src),
                            src == SettingSource::environment ? ": " + row.env : std::string());
    // Defaults sized from the machine say what they saw: in a container, its limits rather than the host's.
    if (src == SettingSource::default_value && row.name == "threads") {
      k.evidence.push_back(fmt::format("the cores this process may use: {} (its affinity mask, less any cgroup CPU "
                                       "quota)",
                                       usable_cores()));
    }
    if (src == SettingSource::default_value && row.name == "pinned_budget") {
      k.evidence.push_back(fmt::format("a quarter of the memory this process may use: {} (physical memory, or a "
                                       "cgroup's limit where lower)",
                                       format_size(usable_memory_bytes())));
    }
    if (row.name == "compat_mode" && c.config.compat_mode() == CompatMode::on) {
      k.status = CheckStatus::warning;
      k.advice = "compat_mode=on keeps every device read off cuFile (staged route).";
    }
    if (row.name == "require" && c.config.require() == Requirement::gds) {
      k.evidence.push_back("require=gds: reads fail before any I/O unless cuFile's direct route is possible");
    }
    s.checks.push_back(std::move(k));
  }
  ForcedCompat forced = cufile_forced_compat(c.driver != nullptr ? c.cufile : nullptr);
  if (forced.forced) {
    s.checks.push_back({kCuFileForceCompatVariable, CheckStatus::warning,
                        forced.describe() + ": cuFile uses only its POSIX path", {},
                        "Unset CUFILE_FORCE_COMPAT_MODE for cuFile's direct route."});
  } else if (forced.unrecognised) {
    s.checks.push_back({kCuFileForceCompatVariable, CheckStatus::warning, forced.describe(), {},
                        "Set CUFILE_FORCE_COMPAT_MODE to true or false, or unset it."});
  }
  s.status = worst_status(s.checks);
  return s;
}

}  // namespace ferry::detail::doctor
