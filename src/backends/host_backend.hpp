// The host route: tasks move bytes straight between the source and the caller's host memory.
#pragma once

#include <memory>

#include "backends/route_backend.hpp"
#include "base/destination.hpp"
#include "source/source.hpp"

namespace ferry::detail {

/// `destination`: the caller's memory (read: where the bytes go, write: where they come from); a task's
/// buffer offset indexes into it. The request's ops join those of the file's other host requests. A task of
/// a scattered read that spans several buffers is read into each of them (Source::read_parts).
std::shared_ptr<RouteBackend> make_host_backend(Source* source, const SourceRequest& request,
                                                Destination destination, Decision decision);

}  // namespace ferry::detail
