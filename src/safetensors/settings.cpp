// effective_settings: the checkpoint's Config after OpenOptions' adjustments.
#include "safetensors/settings.hpp"

#include <fmt/format.h>


namespace ferry::safetensors::detail {
namespace {

constexpr std::uint64_t kMinBounceBuffer = 256 * 1024;

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

Result<EffectiveSettings> effective_settings(const OpenOptions& options, const Seams& /*seams*/) {
  EffectiveSettings s;
  if (options.config) {
    s.config = *options.config;
  } else {
    FERRY_ASSIGN_OR_RETURN(s.config, default_config());
  }
  if (options.max_staging_bytes > 0) FERRY_RETURN_IF_ERROR(cap_staging(s, options.max_staging_bytes));
  return s;
}

}  // namespace ferry::safetensors::detail
