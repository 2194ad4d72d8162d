// split_request: head, body, tail.
#include "engine/task_split.hpp"

#include <algorithm>

namespace ferry::detail {

std::optional<Task> only_task(std::uint64_t offset, std::uint64_t size, std::uint64_t task_size,
                              std::uint64_t alignment) {
  if (size == 0 || size > task_size) return std::nullopt;
  const std::uint64_t end = offset + size;
  const std::uint64_t body_begin = align_up(offset, alignment);
  const std::uint64_t body_end = align_down(end, alignment);
  if (body_begin >= body_end) return Task{offset, size, 0, false};  // inside one block: one unaligned piece
  if (offset == body_begin && end == body_end) return Task{offset, size, 0, true};  // the body alone
  return std::nullopt;  // a head or a tail beside the body
}

std::vector<Task> split_request(std::uint64_t offset, std::uint64_t size, std::uint64_t task_size,
                                std::uint64_t alignment) {
  std::vector<Task> tasks;
  const std::uint64_t end = offset + size;
  const std::uint64_t body_begin = align_up(offset, alignment);
  const std::uint64_t body_end = align_down(end, alignment);
  auto add = [&](std::uint64_t from, std::uint64_t to, bool aligned) {
    tasks.push_back(Task{from, to - from, from - offset, aligned});
  };
  if (body_begin >= body_end) {  // no whole aligned block inside: unaligned pieces of task_size
    for (std::uint64_t at = offset; at < end; at += std::min(task_size, end - at)) {
      add(at, std::min(end, at + task_size), false);
    }
    return tasks;
  }
  if (offset < body_begin) add(offset, body_begin, false);
  tasks.reserve(tasks.size() + (body_end - body_begin + task_size - 1) / task_size + 1);
  for (std::uint64_t at = body_begin; at < body_end; at += task_size) {
    add(at, std::min(body_end, at + task_size), true);
  }
  if (body_end < end) add(body_end, end, false);
  return tasks;
}

}  // namespace ferry::detail
