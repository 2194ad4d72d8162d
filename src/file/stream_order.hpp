// Stream-ordered requests (File::read_async, File::write_async; docs/stream-order.md). Everything that calls the
// driver is done on the caller's thread before anything is queued; Ferry's side runs in a StreamRequest
// (stream_request.hpp).
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
