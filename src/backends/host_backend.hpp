// The host route: tasks move bytes straight between the file and the caller's host memory.
#pragma once

#include <memory>

#include "io/request.hpp"
#include "io/task_io.hpp"

namespace ferry::detail {

/// `buffer` is the caller's (read: destination, write: source); task buffer offsets index into it.
std::shared_ptr<TaskSource> make_host_source(const TaskIo& io, bool is_read, void* buffer, Decision decision);

}  // namespace ferry::detail
