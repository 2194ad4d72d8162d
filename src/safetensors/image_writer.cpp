// write_image: windows filled in file order, each written with one pwrite, filled again once written.
#include "safetensors/image_writer.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "base/timing.hpp"
#include "ferry/safetensors.hpp"
#include "platform/cuda/primary_context.hpp"
#include "safetensors/text.hpp"

namespace ferry::safetensors::detail {
namespace {

using Clock = std::chrono::steady_clock;
using ferry::detail::CUdeviceptr;
using ferry::detail::CudaApi;
using ferry::detail::CUstream;

struct Window {
  std::size_t slot = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::size_t first_piece = 0, last_piece = 0;  // the pieces it holds bytes of
  Future future;
};

// What a window holds, for messages: the header, a tensor, or a run of tensors.
std::string describe(std::span<const ImagePiece> pieces, std::size_t first, std::size_t last) {
  std::vector<const std::string*> names;
  bool header = false;
  for (std::size_t i = first; i <= last && i < pieces.size(); ++i) {
    if (pieces[i].name == nullptr) {
      header = true;
    } else {
      names.push_back(pieces[i].name);
    }
  }
  std::string tensors;
  if (names.size() == 1) tensors = "tensor " + quoted_text(*names.front());
  if (names.size() > 1) {
    tensors = fmt::format("tensors {} to {}", quoted_text(*names.front()), quoted_text(*names.back()));
  }
  if (header) return tensors.empty() ? "the header" : "the header and " + tensors;
  return tensors;
}

// Copies the image's bytes [from, from + size) into `dst`, starting with piece `*next` (advanced past the
// pieces that end inside the window). Device copies are queued on each device's stream and waited for
// before this returns, so the window is complete.
Status fill(std::span<const ImagePiece> pieces, std::size_t* next, std::uint64_t from, std::uint64_t size, char* dst,
            SaveStaging& staging, const CudaApi* api, std::uint64_t* device_bytes) {
  const std::uint64_t to = from + size;
  struct Copy {
    void* dst;
    CUdeviceptr src;
    std::uint64_t n;
  };
  std::map<int, std::vector<Copy>> device_copies;
  for (std::size_t i = *next; i < pieces.size() && pieces[i].file_offset < to; ++i) {
    const ImagePiece& p = pieces[i];
    const std::uint64_t begin = std::max(p.file_offset, from);
    const std::uint64_t end = std::min(p.file_offset + p.size, to);
    if (begin >= end) continue;
    char* out = dst + (begin - from);
    const std::uint64_t skip = begin - p.file_offset;
    if (p.device >= 0) {
      auto src = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p.data)) + skip;
      device_copies[p.device].push_back({out, src, end - begin});
    } else {
      std::memcpy(out, static_cast<const char*>(p.data) + skip, end - begin);
    }
  }
  while (*next < pieces.size() && pieces[*next].file_offset + pieces[*next].size <= to) ++*next;
  if (device_copies.empty()) return Status();

  std::vector<std::pair<int, CUstream>> used;
  for (auto& [device, copies] : device_copies) {
    ferry::detail::ScopedDeviceContext context(*api, device);
    FERRY_RETURN_IF_ERROR(context.status());
    FERRY_ASSIGN_OR_RETURN(CUstream stream, staging.stream_for(device));
    for (const Copy& c : copies) {
      FERRY_RETURN_IF_ERROR(ferry::detail::cuda_check(
          *api, api->cuMemcpyDtoHAsync_v2(c.dst, c.src, c.n, stream),
          fmt::format("copying {} bytes from GPU {} into pinned staging", c.n, device)));
      *device_bytes += c.n;
    }
    used.emplace_back(device, stream);
  }
  for (auto& [device, stream] : used) {
    ferry::detail::ScopedDeviceContext context(*api, device);
    FERRY_RETURN_IF_ERROR(context.status());
    FERRY_RETURN_IF_ERROR(ferry::detail::cuda_check(*api, api->cuStreamSynchronize(stream),
                                                    fmt::format("waiting for copies from GPU {}", device)));
  }
  return Status();
}

}  // namespace

Status write_image(File& file, std::span<const ImagePiece> pieces, std::uint64_t file_bytes, SaveStaging& staging,
                   ImageSignals& signals, const ImageOptions& options, ImageOutcome& out) {
  std::deque<Window> in_flight;
  std::vector<std::size_t> free_slots;
  for (std::size_t i = staging.windows(); i > 0; --i) free_slots.push_back(i - 1);
  Status first;
  std::uint64_t completed = 0;
  bool snapshot_done = false;
  auto last_tell = Clock::now();

  auto cancelled = [&] { return signals.cancel.load(std::memory_order_relaxed); };
  // Progress: what ended plus what the writes in flight moved so far.
  auto tell = [&](bool force) {
    auto now = Clock::now();
    if (!force && now - last_tell < options.progress_interval) return;
    last_tell = now;
    std::uint64_t done = completed;
    for (const Window& w : in_flight) done += w.future.bytes_done();
    signals.written.store(std::min(done, file_bytes), std::memory_order_relaxed);
    if (options.progress && !options.progress(std::min(done, file_bytes), file_bytes)) signals.cancel = true;
  };
  // Waits for the oldest write and gives its window back.
  auto harvest = [&] {
    Window& w = in_flight.front();
    while (!w.future.wait_for(options.progress_interval)) {
      tell(false);
      if (cancelled()) {
        for (Window& other : in_flight) other.future.cancel();
      }
    }
    Result<Transfer> r = w.future.get();
    if (r.ok()) {
      out.report.merge(r->report);
      completed += r->bytes;
    } else if (first.ok() && !(cancelled() && r.status().code() == ErrorCode::cancelled)) {
      // (A write cancelled along with the save is not an error of its own: the save reports the cancel.)
      first = Status(r.status().code(),
                     fmt::format("Could not save \"{}\": writing bytes [{}, {}) ({}) failed: {}", options.path,
                                 w.offset, w.offset + w.size, describe(pieces, w.first_piece, w.last_piece),
                                 r.status().message()),
                     r.status().sys_errno(), options.path);
      for (Window& other : in_flight) other.future.cancel();
    }
    free_slots.push_back(w.slot);
    in_flight.pop_front();
  };

  tell(true);
  std::size_t next_piece = 0;
  for (std::uint64_t from = 0; from < file_bytes && first.ok() && !cancelled(); from += kSaveWindowBytes) {
    if (free_slots.empty()) {
      auto waiting = ferry::detail::now_ns();
      while (free_slots.empty()) harvest();
      out.snapshot_wait_seconds += ferry::detail::seconds_since(waiting);
      if (!first.ok() || cancelled()) break;
    }
    Window w;
    w.slot = free_slots.back();
    free_slots.pop_back();
    w.offset = from;
    w.size = std::min(kSaveWindowBytes, file_bytes - from);
    w.first_piece = next_piece;
    Status filled = fill(pieces, &next_piece, from, w.size, staging.window(w.slot), staging, options.api,
                         &out.device_bytes);
    w.last_piece = std::min(next_piece, pieces.size() - 1);
    while (w.last_piece > w.first_piece && pieces[w.last_piece].file_offset >= w.offset + w.size) --w.last_piece;
    if (!filled.ok()) {
      first = Status(filled.code(),
                     fmt::format("Could not save \"{}\": staging bytes [{}, {}) ({}) failed: {}", options.path,
                                 w.offset, w.offset + w.size, describe(pieces, w.first_piece, w.last_piece),
                                 filled.message()),
                     filled.sys_errno(), options.path);
      free_slots.push_back(w.slot);
      break;
    }
    w.future = file.pwrite(staging.window(w.slot), w.size, w.offset);
    ++out.requests;
    in_flight.push_back(std::move(w));
    if (in_flight.back().offset + in_flight.back().size == file_bytes) {
      snapshot_done = true;
      if (options.on_snapshot) options.on_snapshot();
    }
    tell(false);
  }
  if (cancelled()) {
    for (Window& w : in_flight) w.future.cancel();
  }
  while (!in_flight.empty()) harvest();
  tell(true);
  if (first.ok() && (cancelled() || !snapshot_done)) {
    return Status(ErrorCode::cancelled, fmt::format("Saving \"{}\" was cancelled after {} of {} bytes; \"{}\" is as "
                                                    "it was",
                                                    options.path, completed, file_bytes, options.path));
  }
  return first;
}

}  // namespace ferry::safetensors::detail
