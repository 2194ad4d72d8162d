// Reads into many buffers, one request each: File::pread_batch's pieces, and a range of the file into several
// buffers (FileState::submit_scattered). Every buffer is checked before any I/O.
#include <algorithm>

#include <fmt/format.h>

#include "engine/task_split.hpp"
#include "file/file_state.hpp"
#include "file/route_selection.hpp"

namespace ferry::detail {
namespace {

Status piece_error(const Status& why, std::size_t index, std::size_t count) {
  return Status(why.code(), fmt::format("piece {} of a batch of {}: {}", index, count, why.message()),
                why.sys_errno(), why.path());
}

Status segment_error(const std::string& path, std::size_t index, std::size_t count, const std::string& why) {
  return Status(ErrorCode::invalid_argument,
                fmt::format("Could not read \"{}\" into {} buffers: buffer {} {}", path, count, index, why), EINVAL,
                path);
}

// Segments must cover the request from its first byte, in order, each non-empty and non-null.
Status check_segments(const std::vector<Segment>& segments, const std::string& path) {
  std::uint64_t next = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    if (s.offset != next) {
      return segment_error(path, i, segments.size(),
                           fmt::format("starts at byte {} of the request, not at byte {} where buffer {} ended",
                                       s.offset, next, i == 0 ? 0 : i - 1));
    }
    if (s.length == 0) return segment_error(path, i, segments.size(), "is empty");
    if (s.address == 0) return segment_error(path, i, segments.size(), "is a null pointer");
    next += s.length;
  }
  return Status();
}

// Every buffer from `from` on (`buffer_at(i)`: its address and size; empty ones skipped) must be the memory
// `plan` classified (host, or device memory of its GPU): buffers inside the allocation of the one before cost
// no driver call. Where one is not, or cannot be classified: `refuse(i, what the driver said)`.
template <typename BufferAt, typename Refuse>
Status check_memory(const RoutePlanDetail& plan, std::size_t from, std::size_t count, BufferAt buffer_at,
                    Refuse refuse) {
  const BufferKind& first = plan.buffer;
  if (first.is_host()) return Status();  // host buffers are read into place; the kernel checks each address
  BufferKind last = first;
  for (std::size_t i = from; i < count; ++i) {
    const auto [address, size] = buffer_at(i);
    if (size == 0 || last.holds(address, size)) continue;
    auto kind = classify_buffer(plan.cuda, reinterpret_cast<const void*>(address), size);
    if (!kind.ok() || kind->kind != first.kind || kind->device != first.device) return refuse(i, kind);
    last = *kind;
  }
  return Status();
}

}  // namespace

Future FileState::submit_batch(std::span<const Piece> pieces) {
  std::size_t first_piece = pieces.size();  // the first that is not empty: it decides the route
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (Status s = check_request(Direction::read, p.buffer, p.size, p.offset); !s.ok()) {
      return done_future(piece_error(s, i, pieces.size()));
    }
    if (p.size > 0 && first_piece == pieces.size()) first_piece = i;
  }
  auto in_use = use();
  if (!in_use.ok()) return done_future(in_use.status());
  const SetupMark setup_before = setup_mark();
  std::uint64_t file_bytes = UINT64_MAX;  // the whole file, cut to its size
  if (auto e = extent_for(Direction::read, 0, file_bytes, "a batch"); !e.ok()) return done_future(e.status());
  // Pieces cover the file as it is now: a piece past its end reads what is there, or nothing.
  std::vector<Task> tasks;
  tasks.reserve(pieces.size());
  const std::uint64_t alignment = source->task_alignment();
  for (const Piece& p : pieces) {
    const std::uint64_t n = p.offset >= file_bytes ? 0 : std::min(p.size, file_bytes - p.offset);
    const auto address = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p.buffer));
    for (std::uint64_t at = 0; at < n;) {  // a piece larger than a task is split as a request would be
      const std::uint64_t len = std::min(config.task_size(), n - at);
      tasks.push_back(Task{p.offset + at, len, address + at,
                           is_aligned(p.offset + at, alignment) && is_aligned(len, alignment)});
      at += len;
    }
  }
  // Every piece empty or past the end: nothing to read, done with no route taken.
  if (tasks.empty()) return done_future(Transfer{});
  auto plan = route_for(*this, pieces[first_piece].buffer, pieces[first_piece].size, BufferQuery::ask, /*pieces=*/true);
  if (!plan.ok()) return done_future(piece_error(plan.status(), first_piece, pieces.size()));
  auto piece_at = [&](std::size_t i) {
    return std::pair(reinterpret_cast<std::uintptr_t>(pieces[i].buffer), pieces[i].size);
  };
  auto refuse = [&](std::size_t i, const Result<BufferKind>& kind) {
    if (!kind.ok()) return piece_error(kind.status(), i, pieces.size());
    return Status(ErrorCode::invalid_argument,
                  fmt::format("piece {} of a batch of {} reading \"{}\" is {} memory{}, but piece {} is {} memory "
                              "of GPU {}: a batch moves into one kind of memory on one GPU",
                              i, pieces.size(), path, memory_kind_name(kind->kind),
                              kind->device >= 0 ? fmt::format(" of GPU {}", kind->device) : "", first_piece,
                              memory_kind_name(plan->buffer.kind), plan->buffer.device),
                  EINVAL, path);
  };
  if (Status s = check_memory(*plan, first_piece + 1, pieces.size(), piece_at, refuse); !s.ok()) return done_future(s);
  return start(Direction::read, Destination(), 0, tasks, Extent{true, file_bytes},
               /*short_task_ends_request=*/false, std::move(*plan), std::move(*in_use), setup_before, pieces.size());
}

Future FileState::submit_scattered(std::vector<Segment> segments, std::uint64_t offset) {
  if (Status s = check_segments(segments, path); !s.ok()) return done_future(s);
  const std::uint64_t asked = segments.empty() ? 0 : segments.back().offset + segments.back().length;
  const void* first = segments.empty() ? nullptr : reinterpret_cast<const void*>(segments.front().address);
  if (Status s = check_request(Direction::read, first, asked, offset); !s.ok()) return done_future(s);
  auto in_use = use();
  if (!in_use.ok()) return done_future(in_use.status());
  const SetupMark setup_before = setup_mark();
  std::uint64_t size = asked;  // as pread(): the file as it is now, and no further
  auto extent = extent_for(Direction::read, offset, size, "a range into several buffers");
  if (!extent.ok()) return done_future(extent.status());
  auto plan = route_for(*this, first, size, BufferQuery::stand_in);
  if (!plan.ok()) return done_future(plan.status());
  auto segment_at = [&](std::size_t i) { return std::pair(segments[i].address, segments[i].length); };
  auto refuse = [&](std::size_t i, const Result<BufferKind>& kind) {
    if (!kind.ok()) return segment_error(path, i, segments.size(), kind.status().message());
    return segment_error(path, i, segments.size(),
                         fmt::format("is {} memory, but buffer 0 is {} memory of GPU {}: a read moves into one "
                                     "kind of memory on one GPU",
                                     memory_kind_name(kind->kind), memory_kind_name(plan->buffer.kind),
                                     plan->buffer.device));
  };
  if (Status s = check_memory(*plan, 0, segments.size(), segment_at, refuse); !s.ok()) return done_future(s);
  const std::uint64_t alignment = source->task_alignment();
  std::vector<Task> tasks;
  if (plan->decision.route == Route::host || plan->decision.route == Route::staged) {
    tasks = split_request(offset, size, config.task_size(), alignment);
  } else {
    for (const Segment& s : segments) {  // cuFile: each task in one buffer
      if (s.offset >= size) break;
      for (Task t : split_request(offset + s.offset, std::min(s.length, size - s.offset), config.task_size(), alignment)) {
        t.buffer_offset += s.offset;
        tasks.push_back(t);
      }
    }
  }
  return start(Direction::read, Destination::scattered(std::move(segments)), offset, tasks, *extent,
               /*short_task_ends_request=*/false, std::move(*plan), std::move(*in_use), setup_before);
}

}  // namespace ferry::detail
