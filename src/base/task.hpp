// A task: one piece of a request, between a range of the file and a range of the caller's buffer. The
// engine splits requests into tasks (engine/task_split.hpp), backends run them, sources read and write
// them, so the type lives with the vocabulary beneath all three.
#pragma once

#include <cstdint>

namespace ferry::detail {

struct Task {
  std::uint64_t file_offset = 0;
  std::uint64_t length = 0;
  std::uint64_t buffer_offset = 0;  // from the start of the caller's buffer
  bool aligned = false;             // file_offset and length are multiples of the alignment
};

constexpr std::uint64_t align_down(std::uint64_t v, std::uint64_t a) { return v & ~(a - 1); }
constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) & ~(a - 1); }
constexpr bool is_aligned(std::uint64_t v, std::uint64_t a) { return (v & (a - 1)) == 0; }

}  // namespace ferry::detail
