// A routing decision: the route a request's operations take, and why.
#pragma once

#include <string>

#include "ferry/route.hpp"

namespace ferry::detail {

struct Decision {
  Route route = Route::host;
  Reason reason = Reason::buffer_is_host_memory;
  std::string detail;  // e.g. "cuFileHandleRegister failed with cuFile error 5027 (...)"
};

}  // namespace ferry::detail
