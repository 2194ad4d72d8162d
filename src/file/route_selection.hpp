// Choosing the route of one request and building the backend that carries it out: classify the buffer,
// learn what cuFile can do for this file (once per file), ask the router, and hand the decision to the
// host, staged or cuFile backend. route_for() is the decision alone, shared by real requests,
// File::prepare() and `ferry doctor`, so a prediction is the decision a read would make. prepare_route() and
// warm_up() do a route's one-time work ahead of a read.
#pragma once

#include <memory>
#include <span>

#include "engine/request.hpp"
#include "file/file_state.hpp"
#include "platform/cuda/buffer_kind.hpp"
#include "route/router.hpp"

namespace ferry::detail {

/// How route_for() learns what kind of memory the buffer is.
enum class BufferQuery {
  ask,       // the driver says (cuPointerGetAttributes)
  stand_in,  // asks, for a small buffer of the right kind standing in for a larger read (the doctor's): its
             // allocation is not held to `size`
};

struct RoutePlanDetail {
  Decision decision;
  BufferKind buffer;
  const CudaApi* cuda = nullptr;     // nullptr where CUDA is unusable
  std::shared_ptr<GdsFileState> gds; // set when cuFile itself was asked (loaded, driver opened, file registered)
};

/// The decision a request of `size` bytes with `buffer` would get now (`pieces`: the pieces of a batch, see
/// RouteQuery). Errors: the router's refusals (compat off without cuFile, require=gds), a buffer the driver
/// cannot classify, a device buffer whose allocation is smaller than `size` (unless BufferQuery::stand_in).
Result<RoutePlanDetail> route_for(FileState& file, const void* buffer, std::uint64_t size,
                                  BufferQuery query = BufferQuery::ask, bool pieces = false);

/// The backend that carries out `request` into or out of `destination` on the route `plan` (route_for()'s)
/// picked, for `tasks` (`size` bytes, or 0 for a batch's pieces). A batch's destination has base 0: its tasks
/// carry their addresses.
Result<std::shared_ptr<RouteBackend>> make_route_backend(FileState& file, const SourceRequest& request,
                                                         RoutePlanDetail plan, const Destination& destination,
                                                         std::uint64_t size, std::span<const Task> tasks);

/// Does the one-time work of the route a request would take: loads CUDA and cuFile, registers the file,
/// and for the staged route pins bounce buffers for every worker. Returns the decision.
Result<RoutePlanDetail> prepare_route(FileState& file, const void* buffer, std::uint64_t size);

/// ferry::warm_up with a given driver table (the fake one in the tests); ferry::warm_up passes the process's.
Status warm_up(const CudaApi& api, int device, const Config& config);

}  // namespace ferry::detail
