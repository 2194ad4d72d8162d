// model.safetensors.index.json: which shard file holds each tensor of a sharded checkpoint.
// {"metadata": {...}, "weight_map": {"tensor name": "model-00001-of-00002.safetensors", ...}}
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::safetensors::detail {

/// The index's "metadata" key that maps each shard's file name to its size (beside kSaveIdKey).
inline constexpr char kShardBytesKey[] = "ferry.shard_bytes";

struct ShardIndex {
  std::vector<std::string> shards;  // file names as the index writes them, sorted
  std::vector<std::pair<std::string, std::size_t>> weight_map;  // tensor name -> position in `shards`
  // Written by Ferry's sharded saves (kSaveIdKey, kShardBytesKey in "metadata"); empty for other writers'.
  std::string save_id;
  std::map<std::string, std::uint64_t> shard_bytes;  // shard file name -> its size
};

/// Parses index JSON. `source` names the file in messages. Shard names must be relative paths that stay
/// inside the index's directory (no leading "/", no ".." component). Errors: invalid_argument
/// "Invalid safetensors index "<source>": <what>".
[[nodiscard]] Result<ShardIndex> parse_shard_index(std::string_view text, std::string_view source);

}  // namespace ferry::safetensors::detail
