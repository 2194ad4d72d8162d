// The one-time work of this process, timed where it happens: loading and initialising CUDA, retaining a
// GPU's primary context, loading cuFile, opening its driver, registering files, pinning bounce buffers,
// starting worker threads. A fresh process's first read pays for all of it; ferry::process_setup_costs()
// and the notes of the request during which it happened say how much went where.
// Thread safety: all functions may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "ferry/route.hpp"

namespace ferry::detail {

enum class SetupStep { cuda_init, cuda_context, cufile_load, cufile_driver_open, cufile_register, pinned_buffers, threads };

/// Adds one piece of `step`: its duration, how many things it made, and their bytes (pinned buffers).
void record_setup(SetupStep step, std::chrono::nanoseconds elapsed, std::uint64_t count = 1, std::uint64_t bytes = 0);

/// Where the ledger stood when a request began: how many pieces it held, and their sums.
struct SetupSnapshot {
  std::uint64_t records = 0;
  SetupCosts costs;
};
/// A pointer to the snapshot of the ledger as it stands, made once for each number of pieces and never freed
/// (pieces are few): a request's mark is one pointer, and taking it is two loads.
using SetupMark = const SetupSnapshot*;
SetupMark setup_mark();

/// The note a request's report gets for the one-time work done since `before` (setup_mark() when it began), or
/// an empty string when there was none. Where nothing was recorded meanwhile (every request but a process's
/// first few) that is one load: no sums are taken.
std::string setup_note_since(const SetupMark& before);

/// Times a scope as one piece of a step.
class SetupTimer {
 public:
  explicit SetupTimer(SetupStep step) : step_(step), start_(std::chrono::steady_clock::now()) {}
  ~SetupTimer() {
    if (!cancelled_) record_setup(step_, std::chrono::steady_clock::now() - start_, count_, bytes_);
  }
  void set(std::uint64_t count, std::uint64_t bytes) { count_ = count, bytes_ = bytes; }
  void cancel() { cancelled_ = true; }

 private:
  SetupStep step_;
  std::chrono::steady_clock::time_point start_;
  std::uint64_t count_ = 1, bytes_ = 0;
  bool cancelled_ = false;
};

}  // namespace ferry::detail
