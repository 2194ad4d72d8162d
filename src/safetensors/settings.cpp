// effective_settings: the checkpoint's Config after OpenOptions' adjustments.
#include "safetensors/settings.hpp"

#include <cstdlib>
#include <cstring>
#include <strings.h>

#include <fmt/format.h>

#include "doctor/probes/cufile_config.hpp"
#include "doctor/probes/nvidia_fs.hpp"

namespace ferry::safetensors::detail {
namespace {

constexpr std::uint64_t kMinBounceBuffer = 256 * 1024;

bool forced_compat_env() {
  const char* v = std::getenv("CUFILE_FORCE_COMPAT_MODE");
  return v != nullptr && (::strcasecmp(v, "true") == 0 || std::strcmp(v, "1") == 0);
}

// compat auto without the cost of cuFile's driver open, where the platform already answers the question
// the router would ask cuFile (could it go direct?) with "no".
void skip_cufile_setup(EffectiveSettings& s, const Seams& seams) {
  if (s.config.compat_mode() != CompatMode::automatic || s.config.require() != Requirement::none) return;
  std::optional<bool> nvidia_fs;
  if (auto probe = ferry::detail::doctor::probe_nvidia_fs(seams.platform_root); probe.ok()) {
    nvidia_fs = probe->module_loaded;
  }
  std::optional<bool> p2pdma;
  std::string config_path = "cufile.json";
  if (auto cfg = ferry::detail::doctor::probe_cufile_config(seams.platform_root, seams.cufile_config_env); cfg.ok()) {
    p2pdma = cfg->use_pci_p2pdma.value;
    config_path = cfg->path;
  }
  std::string why = cufile_cannot_go_direct(nvidia_fs, p2pdma, forced_compat_env(), config_path);
  if (why.empty()) return;
  s.config.set_compat_mode(CompatMode::on);
  s.notes.push_back(fmt::format(
      "compat auto decided without loading cuFile: {}, so cuFile could only use its POSIX path and auto would "
      "take the staged route after opening cuFile's driver (0.4-0.85 s in a fresh process); reads use compat on "
      "(reported as compat_mode_on). FERRY_COMPAT_MODE=off uses cuFile anyway; "
      "OpenOptions::avoid_cufile_setup=false lets cuFile answer",
      why));
}

Status cap_staging(EffectiveSettings& s, std::uint64_t cap) {
  Config& c = s.config;
  const std::uint64_t per_thread_min = std::uint64_t{c.bounce_buffers_per_thread()} * kMinBounceBuffer;
  if (cap < per_thread_min) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("max_staging_bytes {} is below the least the staged route can work with: one thread "
                              "with {} bounce buffers of {} ({} bytes)",
                              cap, c.bounce_buffers_per_thread(), format_size(kMinBounceBuffer), per_thread_min));
  }
  auto per_request = [&c] {
    return std::uint64_t{c.threads()} * c.bounce_buffers_per_thread() * c.bounce_buffer_size();
  };
  const std::uint64_t before = per_request();
  // Smaller buffers first (cheap in throughput down to about 1 MiB), then fewer threads.
  while (per_request() > cap && c.bounce_buffer_size() > kMinBounceBuffer) {
    c.set_bounce_buffer_size(std::max(kMinBounceBuffer, c.bounce_buffer_size() / 2));
  }
  if (per_request() > cap) {
    auto threads = static_cast<unsigned>(cap / (std::uint64_t{c.bounce_buffers_per_thread()} * c.bounce_buffer_size()));
    c.set_threads(std::max(1u, threads));
  }
  s.max_requests = static_cast<unsigned>(std::max<std::uint64_t>(1, cap / per_request()));
  s.notes.push_back(fmt::format(
      "max_staging_bytes {}: {} threads x {} bounce buffers of {} per request (was {} per request), at most {} "
      "request(s) at once",
      format_size(cap), c.threads(), c.bounce_buffers_per_thread(), format_size(c.bounce_buffer_size()),
      format_size(before), s.max_requests));
  return Status();
}

}  // namespace

std::string cufile_cannot_go_direct(std::optional<bool> nvidia_fs_loaded, std::optional<bool> p2pdma_enabled,
                                    bool forced_compat, const std::string& cufile_config_path) {
  if (forced_compat) return "CUFILE_FORCE_COMPAT_MODE is set";
  if (!nvidia_fs_loaded || !p2pdma_enabled) return "";  // unsure: let cuFile answer
  if (*nvidia_fs_loaded || *p2pdma_enabled) return "";
  return fmt::format("the nvidia_fs kernel module is not loaded (/proc/modules) and {} does not enable PCI P2PDMA",
                     cufile_config_path);
}

Result<EffectiveSettings> effective_settings(const OpenOptions& options, const Seams& seams) {
  EffectiveSettings s;
  if (options.config) {
    s.config = *options.config;
  } else {
    FERRY_ASSIGN_OR_RETURN(s.config, default_config());
  }
  if (options.avoid_cufile_setup) skip_cufile_setup(s, seams);
  if (options.max_staging_bytes > 0) FERRY_RETURN_IF_ERROR(cap_staging(s, options.max_staging_bytes));
  return s;
}

}  // namespace ferry::safetensors::detail
