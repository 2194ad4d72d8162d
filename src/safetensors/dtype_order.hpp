// The order the reference implementation's writer puts dtypes in (its Dtype enum's order, documented there
// as increasing alignment), for writing byte-identical headers.
#pragma once

#include "ferry/safetensors.hpp"

namespace ferry::safetensors::detail {

/// BOOL 0, U8 1, I8 2, F8_E5M2 3, F8_E4M3 4, I16 5, U16 6, F16 7, BF16 8, I32 9, U32 10, F32 11, F64 12,
/// I64 13, U64 14. The reference writes tensors by this rank, highest first, then by name.
unsigned reference_rank(Dtype d) noexcept;

}  // namespace ferry::safetensors::detail
