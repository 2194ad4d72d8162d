// Which way a request moves bytes: one enum instead of is_read/for_write booleans whose polarity varies.
#pragma once

namespace ferry::detail {

enum class Direction { read, write };
inline constexpr bool is_read(Direction d) { return d == Direction::read; }

}  // namespace ferry::detail
