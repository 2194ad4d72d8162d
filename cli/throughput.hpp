// Throughput arithmetic shared by the subcommands and the benchmark.
#pragma once

#include <cstdint>

namespace ferry::cli {

/// GiB/s for `bytes` moved in `seconds`; 0 when no time was measured.
inline double gib_per_s(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / (1024.0 * 1024.0 * 1024.0) : 0.0;
}

}  // namespace ferry::cli
