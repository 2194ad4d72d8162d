// A high-water mark kept without a lock.
#pragma once

#include <atomic>

namespace ferry::detail {

/// Raises `peak` to `value` unless it already holds as much or more.
template <typename T>
void raise_to_max(std::atomic<T>& peak, T value) {
  T seen = peak.load();
  while (value > seen && !peak.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace ferry::detail
