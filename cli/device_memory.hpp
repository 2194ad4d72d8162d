// GPU memory for the CLI: an allocation on one device through the process's CUDA driver.
#pragma once

#include <cstdint>

#include "ferry/status.hpp"

namespace ferry::cli {

class DeviceBuffer {
 public:
  /// Allocates `size` bytes (at least 1) on `device`. Errors: unavailable when there is no CUDA driver or
  /// GPU ("libcuda.so.1 not found: ..."), invalid_argument for a bad ordinal, the driver's own errors.
  static Result<DeviceBuffer> allocate(int device, std::uint64_t size);
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  ~DeviceBuffer();

  void* pointer() const { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr_)); }
  Status copy_to_host(void* dst, std::uint64_t size) const;
  Status copy_from_host(const void* src, std::uint64_t size);

 private:
  DeviceBuffer(int device, unsigned long long ptr) : device_(device), ptr_(ptr) {}
  int device_;
  unsigned long long ptr_;
};

}  // namespace ferry::cli
