// The 8-byte little-endian header length that opens every safetensors file, and its checks.
#pragma once

#include <cstdint>
#include <string_view>

#include "ferry/safetensors.hpp"

namespace ferry::safetensors::detail {

inline constexpr std::uint64_t kPrefixBytes = 8;

/// N from the first 8 bytes of a file.
std::uint64_t header_length(const unsigned char prefix[8]);

/// OK when a file of `file_bytes` can hold the prefix and a header of `header_bytes` within the limit.
/// Errors: invalid_argument naming `source` (file too short, header over the limit, header past the end).
Status check_header_length(std::uint64_t header_bytes, std::uint64_t file_bytes, std::string_view source,
                           const ParseOptions& options);

}  // namespace ferry::safetensors::detail
