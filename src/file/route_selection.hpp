// Choosing the route of one request and building the backend that carries it out: classify the buffer,
// ask the router, hand the decision to the host, staged or cuFile backend.
#pragma once

#include <memory>

#include "file/file_state.hpp"
#include "io/request.hpp"

namespace ferry::detail {

Result<std::shared_ptr<TaskSource>> select_route_source(FileState& file, const TaskIo& io, bool is_read,
                                                        void* buffer, std::uint64_t size, std::uint64_t offset);

}  // namespace ferry::detail
