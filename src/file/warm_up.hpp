// warm_up with a given driver table (the fake one in the tests); ferry::warm_up passes the process's.
#pragma once

#include "ferry/config.hpp"
#include "ferry/status.hpp"
#include "platform/cuda/cuda_api.hpp"

namespace ferry::detail {

Status warm_up(const CudaApi& api, int device, const Config& config);

}  // namespace ferry::detail
