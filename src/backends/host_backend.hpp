// The host route: tasks move bytes straight between the source and the caller's host memory.
#pragma once

#include <memory>

#include "backends/route_backend.hpp"
#include "source/source.hpp"

namespace ferry::detail {

/// `buffer` is the caller's (read: destination, write: source); task buffer offsets index into it.
std::shared_ptr<RouteBackend> make_host_backend(std::shared_ptr<Source> source, const SourceRequest& request,
                                                void* buffer, Decision decision);

}  // namespace ferry::detail
