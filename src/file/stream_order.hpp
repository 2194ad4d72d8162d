// Stream-ordered requests (File::read_async, File::write_async, whose documentation describes the three
// mechanisms of Report::stream_order and what the caller sees). Everything that calls the driver is done on the
// caller's thread before anything is queued: the route, the bounce slots, two words of pinned memory. With
// stream_copies, a cuStreamWriteValue32 after each copy tells Ferry that its slot is free; writes mirror reads.
// Ferry's side of stream_copies and stream_wait runs on the stream pool, started by the watcher
// (engine/stream_pipeline.hpp): no thread the stream waits for ever calls CUDA or runs user code, so the waits
// are always met, whatever the caller and the driver do meanwhile (docs/stream-order.md argues it).
// Thread safety: all functions may be called from any thread.
#pragma once

#include <cstdint>

#include "base/direction.hpp"
#include "ferry/file.hpp"

namespace ferry::detail {

class FileState;
struct CudaApi;

/// File::read_async and File::write_async (`direction`), with their errors.
Future submit_on_stream(FileState& file, Direction direction, void* buffer, std::uint64_t size, std::uint64_t offset,
                        void* stream);

/// Tests only: frees the pinned words stream-ordered requests used through `api` (a fake driver's reset
/// frees them behind Ferry's back). No stream-ordered request may be pending.
void release_stream_words_for_testing(const CudaApi& api);

}  // namespace ferry::detail
