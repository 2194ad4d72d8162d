// Opening a checkpoint: which files, their headers (read in parallel, validated), one tensor table.
#include <sys/resource.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <unordered_set>

#include <fmt/format.h>

#include "ferry/remote.hpp"
#include "safetensors/checkpoint_state.hpp"
#include "safetensors/header_prefix.hpp"
#include "safetensors/settings.hpp"
#include "safetensors/shard_index.hpp"
#include "safetensors/text.hpp"

namespace ferry::safetensors {
namespace detail {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

struct Resolved {
  std::string path;
  bool is_index = false;
};

// A directory stands for the checkpoint inside it: the index, else model.safetensors, else its only
// *.safetensors file.
Result<Resolved> resolve(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return Resolved{path, ends_with(path, ".json")};
  fs::path dir(path);
  if (fs::exists(dir / kIndexName, ec)) return Resolved{(dir / kIndexName).string(), true};
  if (fs::exists(dir / kSingleName, ec)) return Resolved{(dir / kSingleName).string(), false};
  std::vector<std::string> indexes, files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (ends_with(name, ".safetensors.index.json")) indexes.push_back(entry.path().string());
    if (ends_with(name, ".safetensors")) files.push_back(entry.path().string());
  }
  if (indexes.size() == 1) return Resolved{indexes.front(), true};
  if (indexes.empty() && files.size() == 1) return Resolved{files.front(), false};
  return Status(ErrorCode::not_found,
                fmt::format("No checkpoint to open in directory \"{}\": it holds no {} or {}, and {} *.safetensors "
                            "file(s) and {} *.safetensors.index.json file(s); name the file to open",
                            path, kIndexName, kSingleName, files.size(), indexes.size()),
                ENOENT, path);
}

// Host reads for headers and index files: never refused, whatever the checkpoint's settings require.
Config header_config(const Config& config) {
  Config c = config;
  c.set_require(Requirement::none);
  return c;
}

Result<std::string> read_index_file(const std::string& path, const Config& config, const OpenOptions& options,
                                    const Seams& seams) {
  FERRY_ASSIGN_OR_RETURN(File file, ferry::detail::open_file(path, "r", header_config(config), seams.files));
  FERRY_ASSIGN_OR_RETURN(std::uint64_t size, file.size());
  if (size > options.max_header_bytes) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("Invalid safetensors index \"{}\": {} bytes, more than the limit of {} bytes "
                              "(max_header_bytes)",
                              file.path(), size, options.max_header_bytes),
                  0, file.path());
  }
  std::string text(size, '\0');
  FERRY_ASSIGN_OR_RETURN(Transfer t, file.pread(text.data(), size, 0).get());
  text.resize(t.bytes);
  return text;
}

Result<Shard> open_shard(const std::string& path, const Config& config, const Seams& seams) {
  FERRY_ASSIGN_OR_RETURN(File data, ferry::detail::open_file(path, "r", config, seams.files));
  FERRY_ASSIGN_OR_RETURN(std::uint64_t size, data.size());
  Shard shard{data.path(), std::move(data), std::nullopt, size, Header{}};
  if (config.require() != Requirement::none) {
    FERRY_ASSIGN_OR_RETURN(File header_file, ferry::detail::open_file(path, "r", header_config(config), seams.files));
    shard.header_file.emplace(std::move(header_file));
  }
  return shard;
}

// Every shard stays open while the checkpoint lives (the bytes read are the bytes validated), so a
// checkpoint of many shards can reach the process's descriptor limit: say so, with both numbers.
Status shard_open_failed(const Status& why, std::size_t opened, std::size_t shards) {
  if (why.sys_errno() != EMFILE) return why;
  struct rlimit limit {};
  std::string limits = "its limit";
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limits = fmt::format("its limit of {} open files (RLIMIT_NOFILE; the hard limit is {})", limit.rlim_cur,
                         limit.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(limit.rlim_max));
  }
  return Status(why.code(),
                fmt::format("{}: the checkpoint has {} shards, each held open until it is closed, and the process "
                            "reached {} after opening {} of them (raise it with `ulimit -n` or resource.setrlimit)",
                            why.message(), shards, limits, opened),
                why.sys_errno(), why.path());
}

File& header_file(Shard& s) { return s.header_file ? *s.header_file : s.data; }

// Every shard's prefix, then every shard's header, each round in parallel (a cold sharded checkpoint pays
// two round trips to the disk, not two per shard).
Status read_headers(std::vector<Shard>& shards, const ParseOptions& parse) {
  std::vector<std::array<unsigned char, kPrefixBytes>> prefixes(shards.size());
  std::vector<Future> pending;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    std::uint64_t want = std::min<std::uint64_t>(kPrefixBytes, shards[i].file_bytes);
    pending.push_back(header_file(shards[i]).pread(prefixes[i].data(), want, 0));
  }
  Status first_error;
  std::vector<std::uint64_t> lengths(shards.size());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    auto r = pending[i].get();
    if (!r.ok()) {
      if (first_error.ok()) first_error = r.status();
      continue;
    }
    // A file shorter than the prefix is judged by what was read; any other by its size at open.
    const bool short_file = r->bytes < kPrefixBytes;
    lengths[i] = short_file ? 0 : header_length(prefixes[i].data());
    Status s = check_header_length(lengths[i], short_file ? r->bytes : shards[i].file_bytes, shards[i].path, parse);
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  FERRY_RETURN_IF_ERROR(first_error);

  // The header texts are read a group at a time, at most kHeaderBudget bytes of claimed lengths at once (a
  // shard always goes, alone if need be), and each is let go once parsed: what a shard claims (a remote
  // one's answer could claim 100 MB and send 8 bytes) never piles up across shards before bytes arrive.
  constexpr std::uint64_t kHeaderBudget = 256ull << 20;
  for (std::size_t begin = 0; begin < shards.size() && first_error.ok();) {
    std::size_t end = begin;
    std::uint64_t claimed = 0;
    while (end < shards.size() && (end == begin || claimed + lengths[end] <= kHeaderBudget)) claimed += lengths[end++];
    std::vector<std::string> texts(end - begin);
    pending.clear();
    for (std::size_t i = begin; i < end; ++i) {
      texts[i - begin].resize(lengths[i]);
      pending.push_back(header_file(shards[i]).pread(texts[i - begin].data(), lengths[i], kPrefixBytes));
    }
    for (std::size_t i = begin; i < end; ++i) {
      std::string& text = texts[i - begin];
      auto r = pending[i - begin].get();
      if (!r.ok()) {
        if (first_error.ok()) first_error = r.status();
        continue;
      }
      if (!first_error.ok()) continue;
      if (r->bytes < lengths[i]) {
        first_error = Status(ErrorCode::invalid_argument,
                             fmt::format("Invalid safetensors header in \"{}\": the file ended after {} of the "
                                         "header's {} bytes (it was truncated while being opened)",
                                         shards[i].path, r->bytes, lengths[i]),
                             0, shards[i].path);
        continue;
      }
      auto header = parse_header(text, lengths[i], shards[i].file_bytes - kPrefixBytes - lengths[i], shards[i].path,
                                 parse);
      std::string().swap(text);  // parsed: its memory goes back before the next group is read
      if (!header.ok()) {
        first_error = header.status();
        continue;
      }
      shards[i].header = std::move(*header);
    }
    begin = end;
  }
  return first_error;
}

Status invalid_index(const std::string& index_path, const std::string& what) {
  return Status(ErrorCode::invalid_argument, fmt::format("Invalid safetensors index \"{}\": {}", index_path, what), 0,
                index_path);
}

// A Ferry save records in its index which save each shard belongs to and how long it is: a save killed over
// an earlier one of the same layout leaves a mix of both, which loaded without error before (8 of 20 kills,
// the reliability review of 2026-12-04). Indexes of other writers record nothing and are not checked.
Status check_one_save(const CheckpointState& state, const ShardIndex& index, const std::string& index_path) {
  if (index.save_id.empty()) return Status();
  for (std::size_t s = 0; s < state.shards.size(); ++s) {
    const Shard& shard = state.shards[s];
    const auto& meta = shard.header.metadata;
    auto id = meta.find(kSaveIdKey);
    auto size = index.shard_bytes.find(index.shards[s]);
    const bool same_save = id != meta.end() && id->second == index.save_id;
    const bool same_size = size == index.shard_bytes.end() || size->second == shard.file_bytes;
    if (same_save && same_size) continue;
    return Status(ErrorCode::invalid_argument,
                  fmt::format("Invalid sharded checkpoint \"{}\": \"{}\" is not a shard of the save the index "
                              "describes ({}): a save into this directory was interrupted, and its files are a mix "
                              "of two saves; save it again (or into a new directory)",
                              index_path, shard.path,
                              !same_save ? fmt::format("its save id is {}, the index's {}",
                                                       id == meta.end() ? "missing" : quoted_text(id->second),
                                                       quoted_text(index.save_id))
                                         : fmt::format("it holds {} bytes, the index says {}", shard.file_bytes,
                                                       size->second)),
                  0, shard.path);
  }
  return Status();
}

// The tensor table of every shard, checked against the weight map.
Status merge_shards(CheckpointState& state, const ShardIndex* index, const std::string& index_path) {
  for (std::size_t s = 0; s < state.shards.size(); ++s) {
    for (TensorInfo t : state.shards[s].header.tensors) {
      t.shard = s;
      auto [it, added] = state.index.emplace(t.name, state.tensors.size());
      if (!added) {
        const TensorInfo& other = state.tensors[it->second];
        return Status(ErrorCode::invalid_argument,
                      fmt::format("Invalid sharded checkpoint: tensor {} is in both \"{}\" and \"{}\"", quoted_text(t.name),
                                  state.shards[other.shard].path, state.shards[s].path),
                      0, state.shards[s].path);
      }
      state.data_bytes += t.size_bytes();
      state.tensors.push_back(std::move(t));
    }
    for (const auto& [key, value] : state.shards[s].header.metadata) {
      if (key == kSaveIdKey) continue;  // Ferry's bookkeeping (check_one_save), not the user's metadata
      auto [it, added] = state.metadata.emplace(key, value);
      if (!added && it->second != value) {
        state.notes.push_back(fmt::format("__metadata__ {} differs between shards; kept the value of \"{}\"",
                                          quoted_text(key), state.shards[0].path));
      }
    }
  }
  if (index == nullptr) return Status();
  FERRY_RETURN_IF_ERROR(check_one_save(state, *index, index_path));
  std::unordered_set<std::string> mapped;
  for (const auto& [name, shard] : index->weight_map) {
    mapped.insert(name);
    auto found = state.index.find(name);
    if (found == state.index.end()) {
      return invalid_index(index_path, fmt::format("the weight map puts tensor {} in \"{}\", which has no such tensor",
                                                   quoted_text(name), state.shards[shard].path));
    }
    const TensorInfo& t = state.tensors[found->second];
    if (t.shard != shard) {
      return invalid_index(index_path, fmt::format("the weight map puts tensor {} in \"{}\", but it is in \"{}\"",
                                                   quoted_text(name), state.shards[shard].path, state.shards[t.shard].path));
    }
  }
  std::size_t unmapped = 0;
  const TensorInfo* first = nullptr;
  for (const TensorInfo& t : state.tensors) {
    if (mapped.count(t.name)) continue;
    if (unmapped++ == 0) first = &t;
  }
  if (unmapped > 0) {
    state.notes.push_back(fmt::format("{} tensor(s) of the shards are not in the weight map of \"{}\" (the first: {} "
                                      "in \"{}\"); they are loaded too",
                                      unmapped, index_path, quoted_text(first->name), state.shards[first->shard].path));
  }
  return Status();
}

}  // namespace

Result<Checkpoint> open_checkpoint(const std::string& path, const OpenOptions& options, const Seams& seams) {
  FERRY_ASSIGN_OR_RETURN(Resolved resolved, resolve(path));
  FERRY_ASSIGN_OR_RETURN(EffectiveSettings settings, effective_settings(options, seams));
  auto state = std::make_shared<CheckpointState>();
  state->config = settings.config;
  state->settings_notes = std::move(settings.notes);
  state->max_requests_by_staging = settings.max_requests;
  state->gpu = seams.files.gpu;

  std::optional<ShardIndex> index;
  std::vector<std::string> shard_paths;
  if (resolved.is_index) {
    FERRY_ASSIGN_OR_RETURN(std::string text, read_index_file(resolved.path, state->config, options, seams));
    FERRY_ASSIGN_OR_RETURN(index, parse_shard_index(text, remote::display_url(resolved.path)));
    fs::path dir = fs::path(resolved.path).parent_path();
    for (const std::string& name : index->shards) shard_paths.push_back((dir / name).string());
  } else {
    shard_paths.push_back(resolved.path);
  }
  for (const std::string& p : shard_paths) {
    auto shard = open_shard(p, state->config, seams);
    if (!shard.ok()) return shard_open_failed(shard.status(), state->shards.size(), shard_paths.size());
    state->paths.push_back(shard->path);
    state->shards.push_back(std::move(*shard));
  }
  ParseOptions parse;
  parse.max_header_bytes = options.max_header_bytes;
  FERRY_RETURN_IF_ERROR(read_headers(state->shards, parse));
  FERRY_RETURN_IF_ERROR(merge_shards(*state, index ? &*index : nullptr, remote::display_url(resolved.path)));
  return CheckpointState::make(std::move(state));
}

}  // namespace detail

// ---- Checkpoint: accessors ----

Checkpoint::Checkpoint(std::shared_ptr<detail::CheckpointState> state) : state_(std::move(state)) {}

Result<Checkpoint> Checkpoint::open(const std::string& path, const OpenOptions& options) {
  return detail::open_checkpoint(path, options, detail::Seams{});
}

const std::vector<std::string>& Checkpoint::files() const { return state_->paths; }
const std::vector<TensorInfo>& Checkpoint::tensors() const { return state_->tensors; }
const std::map<std::string, std::string>& Checkpoint::metadata() const { return state_->metadata; }
const std::vector<std::string>& Checkpoint::notes() const { return state_->notes; }
std::uint64_t Checkpoint::data_bytes() const { return state_->data_bytes; }

std::vector<Checkpoint::ShardFacts> Checkpoint::shard_facts() const {
  std::vector<ShardFacts> out;
  for (const detail::Shard& s : state_->shards) out.push_back({s.file_bytes, s.header.header_bytes, s.header.metadata});
  return out;
}
const Config& Checkpoint::config() const { return state_->config; }

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = state_->index.find(std::string(name));
  return it == state_->index.end() ? nullptr : &state_->tensors[it->second];
}

Result<Header> read_header(const std::string& path, const ParseOptions& options) {
  detail::Seams seams;
  std::vector<detail::Shard> one;
  FERRY_ASSIGN_OR_RETURN(Config config, default_config());
  FERRY_ASSIGN_OR_RETURN(detail::Shard shard, detail::open_shard(path, detail::header_config(config), seams));
  one.push_back(std::move(shard));
  FERRY_RETURN_IF_ERROR(detail::read_headers(one, options));
  return std::move(one.front().header);
}

}  // namespace ferry::safetensors
