// Which way a request moves bytes: the public ferry::Direction, used inside Ferry as well, instead of
// is_read/for_write booleans whose polarity varies.
#pragma once

#include "ferry/route.hpp"

namespace ferry::detail {

using ferry::Direction;
inline constexpr bool is_read(Direction d) { return d == Direction::read; }

}  // namespace ferry::detail
