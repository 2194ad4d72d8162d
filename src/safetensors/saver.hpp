// save() and start_save() with the seams tests use: scripted system calls and a fake GPU platform
// (ferry::detail::OpenOptions, as for File). save_sharded goes through these too.
#pragma once

#include <span>
#include <string>

#include "ferry/safetensors.hpp"
#include "file/open_options.hpp"

namespace ferry::safetensors::detail {

[[nodiscard]] Result<SaveStats> save_with(const std::string& path, std::span<const SaveTensor> tensors,
                                          const SaveOptions& options, const ferry::detail::OpenOptions& seams);
[[nodiscard]] Result<SaveHandle> start_save_with(const std::string& path, std::span<const SaveTensor> tensors,
                                                 const SaveOptions& options, const ferry::detail::OpenOptions& seams);

[[nodiscard]] Result<ShardedSaveStats> save_sharded_with(const std::string& directory,
                                                        std::span<const SaveTensor> tensors,
                                                        const ShardedSaveOptions& options,
                                                        const ferry::detail::OpenOptions& seams);

/// invalid_argument naming two tensors whose bytes overlap (`sizes[i]`: tensor i's bytes), else OK.
[[nodiscard]] Status check_overlaps(std::span<const SaveTensor> tensors, std::span<const std::uint64_t> sizes);

}  // namespace ferry::safetensors::detail
