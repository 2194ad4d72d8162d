// Wall time on the steady clock, for the subcommands' and the benchmark's timings.
// Thread safety: pure functions of the clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace ferry::cli {

/// Nanoseconds on the steady clock (an arbitrary origin: only differences mean anything).
inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// Seconds since `start_ns`, a value of now_ns().
inline double seconds_since(std::uint64_t start_ns) { return static_cast<double>(now_ns() - start_ns) / 1e9; }

}  // namespace ferry::cli
