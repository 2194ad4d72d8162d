// One thread that waits for the work jobs leave running when they end (copies to the GPU still under
// way), so that a job's thread takes the next queued job at once instead of waiting with it, and ends each
// such job the moment its work ends (not when some queue reaches it).
//
// On the H200 machine a 32 MiB batch's workers spent 28-34% of their time waiting for their last copy
// (bench/results/2026-12-02-h200-warm-up-and-batches); handing that wait to a thread that polls many
// of them keeps every worker reading. Sending the wait back through the pool's queue instead completed
// requests late and lost (2026-12-02-h200-batch-fills).
//
// The thread is made on first use. Only work on a GPU is watched, and a forked child of a process that
// started CUDA never uses the GPU (cuda_api.cpp), so the child never touches the parent's watcher.
// Thread safety: all members may be called from any thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "backends/route_backend.hpp"

namespace ferry::detail {

/// Takes `work` if fewer than `limit` works are watched now, and calls `ended` with its outcome on the
/// watcher's thread once it has ended (`ended` must not block: it runs before the next work is looked
/// at). Returns false, leaving `work` with the caller, when it held `limit` already; the caller then
/// waits for the work itself (each watched work holds bounce buffers: the limit bounds them).
bool watch_in_flight(std::unique_ptr<WorkInFlight>& work, std::function<void(Status)> ended, std::size_t limit);

}  // namespace ferry::detail
