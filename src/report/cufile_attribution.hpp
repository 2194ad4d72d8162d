// Turning cuFile's own counters into Ferry's routes: a cuFile request is counted under a provisional route
// while it runs, and cuFile's statistics, read before and after it, split its operations afterwards.
#pragma once

#include "base/direction.hpp"
#include "ferry/route.hpp"

namespace ferry::detail {

/// Splits `report`'s operations counted under cuFile routes into nvfs / p2p / cufile-posix in proportion
/// to `delta`'s counts for the request's direction, and records `delta` in report.cufile. With no
/// operations in `delta` the provisional route stays and a note says why.
void attribute_by_cufile_stats(Report& report, const CuFileCounters& delta, Direction direction);

}  // namespace ferry::detail
