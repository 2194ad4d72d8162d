// The host route: tasks move bytes straight between the source and the caller's host memory.
#pragma once

#include <memory>

#include "backends/route_backend.hpp"
#include "source/source.hpp"

namespace ferry::detail {

/// `buffer` is the caller's (read: destination, write: source); task buffer offsets index into it. A
/// worker takes `pack` read tasks at a time (a batch's small pieces), or the source's queue depth if more.
std::shared_ptr<RouteBackend> make_host_backend(std::shared_ptr<Source> source, const SourceRequest& request,
                                                void* buffer, Decision decision, unsigned pack = 1);

}  // namespace ferry::detail
