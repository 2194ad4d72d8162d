// Stream-ordered requests (File::read_async, File::write_async): a request placed in a CUDA stream's order.
//
// Everything that calls the driver is done on the caller's thread before anything is queued: the route,
// the bounce slots, two words of pinned memory. Then one of three mechanisms (Report::stream_order):
//   stream_copies  device memory on the staged route. The copies go on the caller's stream itself: before
//                  copy i, a cuStreamWaitValue32 on Ferry's word for "step i read into its slot"; after it,
//                  a cuStreamWriteValue32 telling Ferry the slot is free. Writes mirror it.
//   stream_wait    host memory. The stream writes a word when it reaches the request and waits on one that
//                  Ferry writes once the request has ended.
//   synchronized   cuFile routes, sources without a size, a stream of another context than the buffer's,
//                  drivers without stream memory operations: the calling thread synchronises the stream,
//                  does the request and waits for it; the future is done when the call returns.
// Ferry's side of the first two runs on the stream pool, started by the watcher (engine/stream_pipeline.hpp):
// no thread the stream waits for ever calls CUDA or runs user code, so the waits are always met, whatever
// the caller and the driver do meanwhile (docs/stream-order.md argues it).
// The future is done once the stream has passed the request's last command (soon after later work on
// the stream may begin). A request that fails or is cancelled still lets the stream through; the buffer's
// contents are then unspecified.
// Thread safety: all functions may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/direction.hpp"
#include "ferry/file.hpp"

namespace ferry::detail {

class FileState;
struct CudaApi;

/// Queues a read or write of `size` bytes at `offset` on `stream` (a CUstream; nullptr is the legacy
/// default stream). Errors known at once (no CUDA driver, a stream the driver rejects, a stream being
/// captured into a graph, bounce slots that cannot be pinned) come back as a failed future, and then
/// nothing was queued.
Future submit_on_stream(FileState& file, Direction direction, void* buffer, std::uint64_t size, std::uint64_t offset,
                        void* stream);

/// Tests only: frees the pinned words stream-ordered requests used through `api` (a fake driver's reset
/// frees them behind Ferry's back). No stream-ordered request may be pending.
void release_stream_words_for_testing(const CudaApi& api);

}  // namespace ferry::detail
