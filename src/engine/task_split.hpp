// Splitting one request into tasks: an unaligned head, an aligned body in task_size pieces, and an
// unaligned tail, so that the body can use O_DIRECT whatever offset the caller asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/task.hpp"

namespace ferry::detail {

/// `alignment` is a power of two; `task_size` a multiple of it. Tasks cover [offset, offset + size)
/// exactly once, in order. A request that fits inside one alignment block is a single unaligned task.
std::vector<Task> split_request(std::uint64_t offset, std::uint64_t size, std::uint64_t task_size,
                                std::uint64_t alignment);

/// The one task split_request() would make of a request, without a vector; nullopt where it would make
/// none or several. (A small read asks this first: the vector was an allocation of every such read.)
std::optional<Task> only_task(std::uint64_t offset, std::uint64_t size, std::uint64_t task_size,
                              std::uint64_t alignment);

}  // namespace ferry::detail
