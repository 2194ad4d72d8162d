// FileState::submit_scattered (file/file_state.hpp): one read of a range of the file into several buffers.
#include <fmt/format.h>

#include "engine/task_split.hpp"
#include "file/file_state.hpp"
#include "file/route_selection.hpp"

namespace ferry::detail {
namespace {

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

// Every buffer must be the memory the first is (host, or device memory of its GPU) and, on a GPU, lie inside
// its allocation: buffers inside the first one's allocation cost no driver call.
Status check_memory(const RoutePlanDetail& plan, const std::vector<Segment>& segments, const std::string& path) {
  BufferKind last = plan.buffer;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    if (plan.buffer.is_host() || last.holds(s.address, s.length)) continue;
    auto kind = classify_buffer(plan.cuda, reinterpret_cast<const void*>(s.address), s.length);
    if (!kind.ok()) return segment_error(path, i, segments.size(), kind.status().message());
    if (kind->kind != plan.buffer.kind || kind->device != plan.buffer.device) {
      return segment_error(path, i, segments.size(),
                           fmt::format("is {} memory, but buffer 0 is {} memory of GPU {}: a read moves into one "
                                       "kind of memory on one GPU",
                                       memory_kind_name(kind->kind), memory_kind_name(plan.buffer.kind),
                                       plan.buffer.device));
    }
    last = *kind;
  }
  return Status();
}

}  // namespace

Future FileState::submit_scattered(std::vector<Segment> segments, std::uint64_t offset) {
  auto fail = [](Status s) { return Future(RequestState::ready(std::move(s))); };
  if (Status s = check_segments(segments, path); !s.ok()) return fail(s);
  const std::uint64_t asked = segments.empty() ? 0 : segments.back().offset + segments.back().length;
  const void* first = segments.empty() ? nullptr : reinterpret_cast<const void*>(segments.front().address);
  if (Status s = check_request(Direction::read, first, asked, offset); !s.ok()) return fail(s);
  auto in_use = use();
  if (!in_use.ok()) return fail(in_use.status());
  const SetupMark setup_before = setup_mark();
  auto file_bytes = size_to_plan_by("a range into several buffers");
  if (!file_bytes.ok()) return fail(file_bytes.status());
  // As pread(): the file as it is now, and no further.
  const std::uint64_t size = offset >= *file_bytes ? 0 : std::min(asked, *file_bytes - offset);
  auto plan = route_for(*this, first, size, BufferQuery::stand_in);
  if (!plan.ok()) return fail(plan.status());
  if (Status s = check_memory(*plan, segments, path); !s.ok()) return fail(s);
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
  return start(Direction::read, Destination::scattered(std::move(segments)), offset, tasks,
               Extent{true, *file_bytes},
               /*short_task_ends_request=*/false, std::move(*plan), std::move(*in_use), setup_before);
}

}  // namespace ferry::detail
