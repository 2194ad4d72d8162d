// Running a load's reads: one request per ReadOp (a File::pread, or a scattered read for a run of tensors), a new one only while those in flight leave a thread
// without a task (and at most N in flight when N is set), progress on the calling thread, the first error
// wins and every request in flight is waited for before returning (so that nothing writes into the caller's
// memory afterwards). Errors name the file and the tensors.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/destination.hpp"
#include "ferry/safetensors.hpp"
#include "safetensors/checkpoint_state.hpp"

namespace ferry::safetensors::detail {

inline constexpr std::size_t kNoRegion = SIZE_MAX;

/// One request of a load: `size` bytes of a shard from `file_offset`, placed in memory by `places` (offsets
/// from the op's first byte, absolute addresses; several for a run of tensors, each at its aligned place).
struct ReadOp {
  std::size_t shard = 0;
  std::uint64_t file_offset = 0;
  std::uint64_t size = 0;
  std::vector<ferry::detail::Segment> places;
  std::size_t first_tensor = 0;  // index into CheckpointState::tensors, for messages
  std::size_t tensor_count = 1;
  std::size_t region = kNoRegion;  // plan region written, for replication
  std::uint64_t region_offset = 0;  // where the op's first byte is in its region

  /// The region's bytes from the op's first byte to its last (padding between its tensors included).
  [[nodiscard]] std::uint64_t region_span() const {
    return places.back().address + places.back().length - places.front().address;
  }
};

struct ExecOptions {
  unsigned max_in_flight = 0;  // 0: all at once
  std::function<bool(std::uint64_t, std::uint64_t)> progress;
  std::chrono::milliseconds progress_interval{100};
  /// Runs on the calling thread after each op completed in full; an error stops the load.
  std::function<Status(const ReadOp&)> on_done;
};

/// Issues `ops` in order. Adds bytes, requests and reports to `stats`. Errors: the first failure (wrapped
/// to name file and tensors), a read that came back short (io_error: the file was truncated), cancelled.
[[nodiscard]] Status execute_reads(CheckpointState& state, const std::vector<ReadOp>& ops, const ExecOptions& options,
                                   LoadStats& stats);

/// `ops` split into pieces of at most `max_bytes` (0: unchanged), cut at 4 KiB file offsets where possible;
/// each piece keeps the places of its own bytes.
std::vector<ReadOp> split_ops(std::vector<ReadOp> ops, std::uint64_t max_bytes);

/// What a request covering `op` is about, for messages: tensor "a" (or tensors "a" to "z" (5 tensors))
/// of "path".
std::string describe_op(const CheckpointState& state, const ReadOp& op);

}  // namespace ferry::safetensors::detail
