// File::pread_batch: many pieces, one request. Every piece is checked before any I/O; the pieces become ops
// that carry their own addresses, which the engine's workers take as many at once as fill a bounce buffer.
#include <algorithm>

#include <fmt/format.h>

#include "file/file_state.hpp"
#include "engine/request.hpp"
#include "file/route_selection.hpp"

namespace ferry::detail {
namespace {

Status piece_error(const Status& why, std::size_t index, std::size_t count) {
  return Status(why.code(), fmt::format("piece {} of a batch of {}: {}", index, count, why.message()),
                why.sys_errno(), why.path());
}

// Every piece after `first_piece` (the first that is not empty, whose memory `plan` classified) must be the
// memory it is (host, or device memory of its GPU): what differs is refused, naming its index in the batch.
// Device pieces inside the allocation of the piece before cost no driver call; others are asked about.
Status check_piece_memory(const RoutePlanDetail& plan, std::span<const Piece> pieces, std::size_t first_piece,
                          const std::string& path) {
  const BufferKind& first = plan.buffer;
  if (first.is_host()) return Status();  // host pieces are read into place; the kernel checks each address
  BufferKind last = first;
  for (std::size_t i = first_piece + 1; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (p.size == 0) continue;
    const auto address = reinterpret_cast<std::uintptr_t>(p.buffer);
    if (last.holds(address, p.size)) continue;
    auto kind = classify_buffer(plan.cuda, p.buffer, p.size);
    if (!kind.ok()) return piece_error(kind.status(), i, pieces.size());
    if (kind->kind != first.kind || kind->device != first.device) {
      return Status(ErrorCode::invalid_argument,
                    fmt::format("piece {} of a batch of {} reading \"{}\" is {} memory{}, but piece {} is {} memory "
                                "of GPU {}: a batch moves into one kind of memory on one GPU",
                                i, pieces.size(), path, memory_kind_name(kind->kind),
                                kind->device >= 0 ? fmt::format(" of GPU {}", kind->device) : "", first_piece,
                                memory_kind_name(first.kind), first.device),
                    EINVAL, path);
    }
    last = *kind;
  }
  return Status();
}

}  // namespace

Future FileState::submit_batch(std::span<const Piece> pieces) {
  auto fail = [](Status s) { return Future(RequestState::ready(std::move(s))); };
  std::size_t first_piece = pieces.size();  // the first that is not empty: it decides the route
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (Status s = check_request(Direction::read, p.buffer, p.size, p.offset); !s.ok()) {
      return fail(piece_error(s, i, pieces.size()));
    }
    if (p.size > 0 && first_piece == pieces.size()) first_piece = i;
  }
  auto in_use = use();
  if (!in_use.ok()) return fail(in_use.status());
  const SetupMark setup_before = setup_mark();
  auto sized = size_to_plan_by("a batch");
  if (!sized.ok()) return fail(sized.status());
  const std::uint64_t file_bytes = *sized;
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
  if (tasks.empty()) return Future(RequestState::ready(Transfer{}));
  auto plan = route_for(*this, pieces[first_piece].buffer, pieces[first_piece].size, BufferQuery::ask, /*pieces=*/true);
  if (!plan.ok()) return fail(piece_error(plan.status(), first_piece, pieces.size()));
  if (Status s = check_piece_memory(*plan, pieces, first_piece, path); !s.ok()) return fail(s);
  return start(Direction::read, Destination(), 0, tasks, Extent{true, file_bytes},
               /*short_task_ends_request=*/false, std::move(*plan), std::move(*in_use), setup_before, pieces.size());
}

}  // namespace ferry::detail
