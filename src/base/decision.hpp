// A routing decision: the route a request's operations take, and why. Every layer counts operations under
// one, so it lives with the vocabulary (the router, above the engine, makes them).
#pragma once

#include <string>

#include "ferry/route.hpp"

namespace ferry::detail {

struct Decision {
  Route route = Route::host;
  Reason reason = Reason::buffer_is_host_memory;
  std::string detail;  // e.g. "cuFileHandleRegister failed with cuFile error 5027 (...)"
};

/// Whether a route is one of cuFile's.
constexpr bool is_cufile_route(Route r) { return r == Route::nvfs || r == Route::p2p || r == Route::cufile_posix; }

}  // namespace ferry::detail
