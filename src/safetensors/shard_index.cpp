// parse_shard_index: the weight map of a sharded checkpoint, checked.
#include "safetensors/shard_index.hpp"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "ferry/safetensors.hpp"
#include "safetensors/json_parse.hpp"
#include "safetensors/text.hpp"

namespace ferry::safetensors::detail {
namespace {

Status invalid(std::string_view source, const std::string& what) {
  return Status(ErrorCode::invalid_argument, fmt::format("Invalid safetensors index \"{}\": {}", source, what), 0,
                std::string(source));
}

// A shard name must name a file next to the index (or below it), never elsewhere on the machine.
bool stays_inside(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.find('\0') != std::string_view::npos) return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    if (name.substr(start, slash - start) == "..") return false;
    start = slash + 1;
  }
  return true;
}

}  // namespace

Result<ShardIndex> parse_shard_index(std::string_view text, std::string_view source) {
  nlohmann::json root;
  std::string error;
  if (!parse_json_object(text, root, error)) return invalid(source, error);
  auto map = root.find("weight_map");
  if (map == root.end()) return invalid(source, "no \"weight_map\"");
  if (!map->is_object()) {
    return invalid(source, fmt::format("\"weight_map\" must be an object, not {}", json_excerpt(*map)));
  }
  ShardIndex index;
  std::unordered_map<std::string, std::size_t> position;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string()) {
      return invalid(source, fmt::format("\"weight_map\" entry {} must name a file, not {}", quoted_text(name),
                                         json_excerpt(file)));
    }
    const std::string& shard = file.get_ref<const std::string&>();
    if (!stays_inside(shard)) {
      return invalid(source, fmt::format("\"weight_map\" entry {} names {}, which is not a file inside the index's "
                                         "directory",
                                         quoted_text(name), quoted_text(shard)));
    }
    auto [it, added] = position.emplace(shard, index.shards.size());
    if (added) index.shards.push_back(shard);
    index.weight_map.emplace_back(name, it->second);
  }
  if (index.shards.empty()) return invalid(source, "\"weight_map\" names no tensors");
  // What a Ferry save recorded about the set; other writers' indexes have none of it.
  if (auto meta = root.find("metadata"); meta != root.end() && meta->is_object()) {
    if (auto id = meta->find(kSaveIdKey); id != meta->end() && id->is_string()) index.save_id = id->get<std::string>();
    if (auto sizes = meta->find(kShardBytesKey); sizes != meta->end() && sizes->is_object()) {
      for (const auto& [name, size] : sizes->items()) {
        if (size.is_number_unsigned()) index.shard_bytes[name] = size.get<std::uint64_t>();
      }
    }
  }
  // Shards in name order ("model-00001-of-00003..." first), whatever order the tensor names gave.
  std::vector<std::size_t> order(index.shards.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return index.shards[a] < index.shards[b]; });
  std::vector<std::size_t> renumber(order.size());
  std::vector<std::string> sorted(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    renumber[order[i]] = i;
    sorted[i] = std::move(index.shards[order[i]]);
  }
  index.shards = std::move(sorted);
  for (auto& entry : index.weight_map) entry.second = renumber[entry.second];
  return index;
}

}  // namespace ferry::safetensors::detail
