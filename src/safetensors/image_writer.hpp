// Writing a file image (header, then tensor data) through staging windows, in file order: each window is
// filled (cuMemcpyDtoHAsync from GPU memory on the tensor's device, memcpy from host memory), its copies are
// waited for, and it is written with one File::pwrite; a window is filled again once its write has ended.
// The snapshot is the moment the last window has been filled: from then on no tensor is read. With fewer
// windows than the file needs, filling waits for writes, and the outcome says for how long.
// Thread safety: write_image runs on one thread; `signals` may be read and `cancel` set from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "ferry/file.hpp"
#include "ferry/route.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "safetensors/save_staging.hpp"

namespace ferry::safetensors::detail {

/// A contiguous stretch of the image and where its bytes are now.
struct ImagePiece {
  std::uint64_t file_offset = 0;
  std::uint64_t size = 0;
  const void* data = nullptr;
  int device = -1;                  // a GPU ordinal (data is device or managed memory), or -1 for host memory
  const std::string* name = nullptr;  // the tensor's, for messages; nullptr for the header
};

/// Shared with a SaveHandle while the image is written.
struct ImageSignals {
  std::atomic<bool> cancel{false};
  std::atomic<std::uint64_t> written{0};  // bytes whose writes have ended (updated every progress interval)
};

struct ImageOptions {
  const ferry::detail::CudaApi* api = nullptr;  // needed when a piece is in GPU memory
  std::string path;                             // the file the caller asked for, for messages
  std::function<void()> on_snapshot;            // once, when the last window has been filled
  std::function<bool(std::uint64_t, std::uint64_t)> progress;  // false cancels
  std::chrono::milliseconds progress_interval{100};
};

struct ImageOutcome {
  Report report;
  unsigned requests = 0;
  std::uint64_t device_bytes = 0;    // copied from GPU memory
  double snapshot_wait_seconds = 0;  // filling waited this long for writes to free a window
};

/// Writes `pieces` (sorted by file offset, covering [0, file_bytes) exactly) into `file`. Every write has
/// ended when this returns, failed or not. Errors: the first failure, naming `options.path`, the byte range
/// and the tensors of its window; cancelled (by `signals.cancel` or the progress callback).
[[nodiscard]] Status write_image(File& file, std::span<const ImagePiece> pieces, std::uint64_t file_bytes,
                                 SaveStaging& staging, ImageSignals& signals, const ImageOptions& options,
                                 ImageOutcome& out);

}  // namespace ferry::safetensors::detail
