// Stream-ordered requests (File::read_async, File::write_async): a request placed in a CUDA stream's order.
//
// On the caller's thread, two things are queued on the caller's stream and nothing waits:
//   1. a host function (cuLaunchHostFunc). The driver runs it once the work queued before it has finished;
//      it only hands a job to Ferry's pool (a host function must not call CUDA), and that job submits
//      the request as pread/pwrite would, on any route.
//   2. a wait for the request's end: cuStreamWaitValue32 (GEQ) on a word of pinned, device-mapped host
//      memory that the request's completion writes. Where the driver lacks stream memory operations or
//      refuses this one, a second host function that blocks until the request ends (which holds up the
//      driver's host-function thread, so other streams' host functions wait too: the fallback only).
// The future completes before the stream is released, so work queued on the stream after the request sees
// the future done. A request that fails (or is cancelled, or finds the File closed) releases the stream
// all the same; the error is in its future.
// Thread safety: all functions may be called from any thread.
#pragma once

#include <cstdint>

#include "base/direction.hpp"
#include "ferry/file.hpp"

namespace ferry::detail {

class FileState;
struct CudaApi;

/// Queues a read or write of `size` bytes at `offset` on `stream` (a CUstream; nullptr is the
/// legacy default stream). Errors known at once (no CUDA driver, a driver without cuLaunchHostFunc, a
/// stream the driver rejects) come back as a failed future, and then nothing was queued.
Future submit_on_stream(FileState& file, Direction direction, void* buffer, std::uint64_t size, std::uint64_t offset,
                        void* stream);

/// Tests only: frees the pinned words stream-ordered requests waited on through `api` (a fake driver's
/// reset frees them behind Ferry's back). No stream-ordered request may be pending.
void release_stream_flags_for_testing(const CudaApi& api);

}  // namespace ferry::detail
