// The settings a checkpoint's reads use: the caller's Config (or the default one) with the two adjustments
// OpenOptions asks for -- skipping cuFile's set-up where it could not go direct anyway, and a cap on
// pinned staging memory -- each recorded as a note.
#pragma once

#include <string>
#include <vector>

#include "ferry/config.hpp"
#include "safetensors/checkpoint_state.hpp"

namespace ferry::safetensors::detail {

struct EffectiveSettings {
  Config config;
  std::vector<std::string> notes;
  unsigned max_requests = 0;  // requests in flight that max_staging_bytes allows; 0: no limit
};

/// Errors: the environment's (a bad FERRY_* variable), invalid_argument for a staging cap too small to work.
[[nodiscard]] Result<EffectiveSettings> effective_settings(const OpenOptions& options, const Seams& seams);


}  // namespace ferry::safetensors::detail
