// ferry/direction.hpp: which way a request moves bytes, named instead of a bool whose polarity a reader
// has to look up (File::prepare).
// Thread safety: a plain value.
#pragma once

namespace ferry {

/// `read`: from the file into memory. `write`: from memory into the file.
enum class Direction { read, write };

}  // namespace ferry
