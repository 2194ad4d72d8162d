// Where a load puts each tensor: the device map, the regions (one per device, plus replicas) and each
// tensor's offset in its region, chosen so that tensors next to each other in a file stay next to each
// other in memory (one pread moves a whole run) while every tensor stays aligned to its dtype.
#pragma once

#include <vector>

#include "ferry/safetensors.hpp"

namespace ferry::safetensors::detail {

/// The device `name` goes to under `options` (device map, else options.device).
int device_for(const std::string& name, const LoadOptions& options);

/// Pure: the plan for `tensors` (in checkpoint order). Errors: invalid_argument for devices below -1, and
/// replicas that are not distinct GPUs other than a GPU `device`, or that come with a device map.
[[nodiscard]] Result<LoadPlan> make_plan(const std::vector<TensorInfo>& tensors, const LoadOptions& options);

}  // namespace ferry::safetensors::detail
