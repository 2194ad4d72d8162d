// Splitting one request into tasks: an unaligned head, an aligned body in task_size pieces, and an
// unaligned tail, so that the body can use O_DIRECT whatever offset the caller asked for.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::detail {

struct Task {
  std::uint64_t file_offset = 0;
  std::uint64_t length = 0;
  std::uint64_t buffer_offset = 0;  // from the start of the caller's buffer
  bool aligned = false;             // file_offset and length are multiples of the alignment
};

/// `alignment` is a power of two; `task_size` a multiple of it. Tasks cover [offset, offset + size)
/// exactly once, in order. A request that fits inside one alignment block is a single unaligned task.
std::vector<Task> split_request(std::uint64_t offset, std::uint64_t size, std::uint64_t task_size,
                                std::uint64_t alignment);

constexpr std::uint64_t align_down(std::uint64_t v, std::uint64_t a) { return v & ~(a - 1); }
constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) & ~(a - 1); }
constexpr bool is_aligned(std::uint64_t v, std::uint64_t a) { return (v & (a - 1)) == 0; }

}  // namespace ferry::detail
