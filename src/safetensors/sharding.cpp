// save_sharded: Hugging Face's shard layout (model-00001-of-00003.safetensors and
// model.safetensors.index.json), each file saved atomically, the index last.
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/timing.hpp"
#include "file/output_file.hpp"
#include "safetensors/saver.hpp"
#include "safetensors/shard_index.hpp"
#include "safetensors/text.hpp"

namespace ferry::safetensors {
namespace detail {
namespace {

std::string join_path(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Tensors that are the same memory as an earlier one (address, dtype and shape) are saved once, under the
// first name, as save_pretrained and safetensors' save_model keep one name of tied weights.
std::vector<SaveTensor> without_aliases(std::span<const SaveTensor> tensors,
                                        std::vector<std::pair<std::string, std::string>>& aliases) {
  std::vector<SaveTensor> kept;
  std::map<std::tuple<const void*, Dtype, std::vector<std::uint64_t>>, std::size_t> first;
  for (const SaveTensor& t : tensors) {
    if (t.data != nullptr) {
      auto [it, fresh] = first.emplace(std::make_tuple(t.data, t.dtype, t.shape), kept.size());
      if (!fresh) {
        aliases.emplace_back(t.name, kept[it->second].name);
        continue;
      }
    }
    kept.push_back(t);
  }
  return kept;
}

// Whether `name` is PREFIX-NNNNN-of-NNNNN.safetensors (five digits each, as transformers names shards).
// Plain comparisons, not std::regex: under PyTorch, whose libraries are loaded globally and carry their own
// instantiations of libstdc++'s regex templates, a std::regex here crashed the process on the GPU machine.
bool is_shard_name(std::string_view name, std::string_view prefix) {
  auto digits = [&](std::size_t at) {
    return std::all_of(name.begin() + at, name.begin() + at + 5, [](char c) { return c >= '0' && c <= '9'; });
  };
  constexpr std::string_view of = "-of-", suffix = ".safetensors";
  const std::size_t first = prefix.size() + 1, second = first + 5 + of.size();
  return name.size() == second + 5 + suffix.size() && name.substr(0, prefix.size()) == prefix &&
         name[prefix.size()] == '-' && digits(first) && name.substr(first + 5, of.size()) == of && digits(second) &&
         name.substr(second + 5) == suffix;
}

// Files of an earlier save with this prefix that this one does not write: they would mislead readers (an
// index beside a single file, shards of another count).
std::vector<std::string> stale_files(const std::string& directory, const std::string& prefix,
                                     const std::set<std::string>& writing) {
  std::vector<std::string> stale;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ec)) {
    std::string name = entry.path().filename().string();
    bool ours = name == prefix + ".safetensors" || name == prefix + ".safetensors.index.json" ||
                is_shard_name(name, prefix);
    if (ours && !writing.count(name)) stale.push_back(name);
  }
  std::sort(stale.begin(), stale.end());
  return stale;
}

Status make_directory(const std::string& directory) {
  struct stat st {};
  if (::stat(directory.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status();
    return Status(ErrorCode::failed_precondition,
                  fmt::format("Could not save shards into \"{}\": it exists and is not a directory", directory), ENOTDIR,
                  directory);
  }
  if (::mkdir(directory.c_str(), 0777) != 0 && errno != EEXIST) {
    return Status::from_errno(errno, fmt::format("Could not create the directory \"{}\"", directory), directory);
  }
  return Status();
}

// 16 random hex digits naming one sharded save.
std::string random_save_id() {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, 0) != static_cast<ssize_t>(sizeof bits)) {
    bits = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           (static_cast<std::uint64_t>(::getpid()) << 32);
  }
  return fmt::format("{:016x}", bits);
}

}  // namespace

Result<ShardedSaveStats> save_sharded_with(const std::string& directory, std::span<const SaveTensor> tensors,
                                           const ShardedSaveOptions& options, const ferry::detail::OpenOptions& seams) {
  auto started = ferry::detail::now_ns();
  ShardedSaveStats stats;
  std::vector<SaveTensor> kept = without_aliases(tensors, stats.aliases);
  // Everything is checked before the first file is written: names and metadata, and overlaps across shards.
  auto image = serialize_header(kept, options.save.metadata);
  if (!image.ok()) {
    return Status(image.status().code(), fmt::format("Could not save shards into \"{}\": {}", directory,
                                                     image.status().message()));
  }
  if (options.save.refuse_overlapping) {
    Status s = check_overlaps(kept, image->size_bytes);
    if (!s.ok()) return Status(s.code(), fmt::format("Could not save shards into \"{}\": {}", directory, s.message()));
  }
  if (options.prefix.empty() || options.prefix.find('/') != std::string::npos ||
      options.prefix.find('\0') != std::string::npos) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("the shard prefix {} must be a non-empty file name", quoted_text(options.prefix)));
  }
  const std::vector<std::vector<std::size_t>> shards = plan_shards(image->size_bytes, options.max_shard_bytes);
  for (std::uint64_t n : image->size_bytes) stats.total_size += n;

  std::vector<std::string> names;
  if (shards.size() <= 1) {
    names.push_back(options.prefix + ".safetensors");
  } else {
    for (std::size_t i = 0; i < shards.size(); ++i) {
      names.push_back(fmt::format("{}-{:05d}-of-{:05d}.safetensors", options.prefix, i + 1, shards.size()));
    }
  }
  const std::string index_name = options.prefix + ".safetensors.index.json";
  std::set<std::string> writing(names.begin(), names.end());
  if (shards.size() > 1) writing.insert(index_name);

  FERRY_RETURN_IF_ERROR(make_directory(directory));
  std::vector<std::string> stale = stale_files(directory, options.prefix, writing);
  if (!stale.empty() && !options.remove_stale) {
    std::string list;
    for (const auto& s : stale) list += (list.empty() ? "\"" : ", \"") + s + "\"";
    return Status(ErrorCode::already_exists,
                  fmt::format("Could not save shards into \"{}\": it holds {} from an earlier save that this one would "
                              "not replace, and readers could take them for the checkpoint; remove them, or pass "
                              "remove_stale to have them removed once the new checkpoint is complete",
                              directory, list),
                  EEXIST, directory);
  }

  const std::string save_id = random_save_id();
  // The shards, one after another; an empty checkpoint is one file with no tensors. Progress is the whole
  // save's: the tensor bytes of the shards written so far, and the share of this one's file written.
  nlohmann::json weight_map = nlohmann::json::object();
  std::uint64_t bytes_before = 0;
  for (std::size_t s = 0; s < std::max<std::size_t>(shards.size(), 1); ++s) {
    std::vector<SaveTensor> part;
    std::uint64_t part_bytes = 0;
    if (!shards.empty()) {
      for (std::size_t i : shards[s]) {
        part.push_back(kept[i]);
        part_bytes += image->size_bytes[i];
        weight_map[kept[i].name] = names[s];
      }
    }
    SaveOptions shard_options = options.save;
    if (shards.size() > 1) {
      if (!shard_options.metadata) shard_options.metadata.emplace();
      (*shard_options.metadata)[kSaveIdKey] = save_id;
    }
    if (options.save.progress) {
      shard_options.progress = [&, bytes_before, part_bytes](std::uint64_t done, std::uint64_t file_bytes) {
        const std::uint64_t share = file_bytes == 0 ? part_bytes : part_bytes * std::min(done, file_bytes) / file_bytes;
        return options.save.progress(bytes_before + share, stats.total_size);
      };
    }
    const std::string path = join_path(directory, names[s]);
    FERRY_ASSIGN_OR_RETURN(SaveStats shard, save_with(path, part, shard_options, seams));
    bytes_before += part_bytes;
    stats.files.push_back(path);
    stats.shards.push_back(std::move(shard));
  }
  if (shards.size() > 1) {
    // As transformers writes it: json.dumps(index, indent=2, sort_keys=True) + "\n" (ASCII, keys sorted).
    // What belongs together: a reader can tell a mix of two saves (an interrupted save over an earlier one).
    nlohmann::json sizes = nlohmann::json::object();
    for (std::size_t s = 0; s < names.size(); ++s) sizes[names[s]] = stats.shards[s].file_bytes;
    nlohmann::json index = {{"metadata", {{"total_size", stats.total_size}, {kSaveIdKey, save_id}, {kShardBytesKey, sizes}}},
                            {"weight_map", weight_map}};
    stats.index = join_path(directory, index_name);
    FERRY_RETURN_IF_ERROR(ferry::detail::replace_file_contents(stats.index, index.dump(2, ' ', true) + "\n",
                                                         options.save.durable));
  }
  for (const std::string& name : stale) {
    const std::string path = join_path(directory, name);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::from_errno(errno, fmt::format("Could not remove the stale \"{}\"", path), path);
    }
    stats.removed.push_back(path);
  }
  stats.seconds = ferry::detail::seconds_since(started);
  return stats;
}

}  // namespace detail

std::vector<std::vector<std::size_t>> plan_shards(std::span<const std::uint64_t> sizes, std::uint64_t max_shard_bytes) {
  std::vector<std::vector<std::size_t>> shards;
  std::vector<std::size_t> current;
  std::uint64_t current_bytes = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] > max_shard_bytes) {
      shards.push_back({i});
      continue;
    }
    if (current_bytes + sizes[i] > max_shard_bytes && !current.empty()) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += sizes[i];
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

Result<ShardedSaveStats> save_sharded(const std::string& directory, std::span<const SaveTensor> tensors,
                                      const ShardedSaveOptions& options) {
  return detail::save_sharded_with(directory, tensors, options, ferry::detail::OpenOptions{});
}

}  // namespace ferry::safetensors
