// The state behind a Checkpoint, and the internal way to open one with fake system calls, a fake GPU
// platform and a fake /proc (tests), the way detail::open_file does for File.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ferry/file.hpp"
#include "ferry/safetensors.hpp"
#include "file/open_options.hpp"

namespace ferry::safetensors::detail {

struct Seams {
  ferry::detail::OpenOptions files;  // system calls and GPU platform for every File
};

/// One file of the checkpoint, open for its whole life.
struct Shard {
  std::string path;
  File data;                        // reads of tensor data, with the checkpoint's settings
  std::optional<File> header_file;  // only when those settings refuse host reads (require=gds)
  std::uint64_t file_bytes = 0;     // the size that was validated
  Header header;
};

class CheckpointState {
 public:
  static Checkpoint make(std::shared_ptr<CheckpointState> state) { return Checkpoint(std::move(state)); }
  static CheckpointState& of(const Checkpoint& c) { return *c.state_; }

  std::vector<Shard> shards;
  std::vector<std::string> paths;           // shards[i].path, for files()
  std::vector<TensorInfo> tensors;          // by shard, then data offset
  std::unordered_map<std::string, std::size_t> index;  // name -> position in `tensors`
  std::map<std::string, std::string> metadata;
  std::vector<std::string> notes;           // found while opening
  std::uint64_t data_bytes = 0;

  Config config;                            // after OpenOptions' adjustments
  std::vector<std::string> settings_notes;  // what those adjustments were, and why
  unsigned max_requests_by_staging = 0;     // 0: no limit from max_staging_bytes
  const ferry::detail::GpuPlatform* gpu = nullptr;  // nullptr: the process's
};

/// Checkpoint::open with seams.
[[nodiscard]] Result<Checkpoint> open_checkpoint(const std::string& path, const OpenOptions& options,
                                                 const Seams& seams);

/// load() with seams.
[[nodiscard]] Result<LoadedCheckpoint> load_checkpoint(const std::string& path, const LoadOptions& options,
                                                       const OpenOptions& open_options, const Seams& seams);

}  // namespace ferry::safetensors::detail
