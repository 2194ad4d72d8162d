// Where a load puts each tensor: the device map, the regions (one per device, plus replicas) and each
// tensor's offset in its region: in file order, each at the next offset aligned as the framework's own
// allocator would align it (kDeviceTensorAlignment, kHostTensorAlignment).
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
