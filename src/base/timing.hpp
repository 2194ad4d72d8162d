// Wall time on the steady clock and throughput, for the safetensors loads' and saves' timings, the doctor's
// and the tools' (one of the headers of src/ the tools may include).
// Thread safety: pure functions (of the clock).
#pragma once

#include <chrono>
#include <cstdint>

namespace ferry::detail {

/// Nanoseconds on the steady clock (an arbitrary origin: only differences mean anything).
inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// Seconds since `start_ns`, a value of now_ns().
inline double seconds_since(std::uint64_t start_ns) { return static_cast<double>(now_ns() - start_ns) / 1e9; }

/// GiB/s for `bytes` moved in `seconds`; 0 when no time was measured.
inline double gib_per_s(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / (1024.0 * 1024.0 * 1024.0) : 0.0;
}

}  // namespace ferry::detail
