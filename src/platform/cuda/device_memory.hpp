// Device memory on one GPU, for Ferry's own tools: the doctor's probe, the `ferry` and `ferry-bench` programs
// (one of the headers of src/ they may include) and the tests. A program that uses Ferry brings its own device
// memory (cudaMalloc, PyTorch, ...); Ferry's tools have none, so they get it here rather than each reaching
// into the CUDA driver table. This header names no CUDA type, so a tool includes nothing else from src/ for it.
// Not installed; not for users of Ferry.
//
// Every call makes the device's primary context (the one Ferry's reads and the CUDA runtime use) current for
// its own duration and restores what was current before, so a tool's thread is left as it was.
// Thread safety: a DeviceMemory is used from one thread at a time; different ones from any threads.
#pragma once

#include <cstdint>

#include "ferry/status.hpp"

namespace ferry::detail {

struct CudaApi;

class DeviceMemory {
 public:
  /// Allocates `size_bytes` (at least 1 byte is allocated) on GPU `device` through the process's CUDA driver.
  /// Errors: unavailable with "cannot use GPU N: <why>" when there is no usable CUDA driver or GPU
  /// ("libcuda.so.1 not found: ...", "cuInit failed: ..."); invalid_argument for an ordinal the driver does
  /// not have; the driver's own errors ("cuMemAlloc of N bytes on GPU D failed: CUDA_ERROR_OUT_OF_MEMORY ...").
  [[nodiscard]] static Result<DeviceMemory> allocate(int device, std::uint64_t size_bytes);
  /// The same through `cuda`, which must outlive the memory (the doctor passes its platform's table, tests a
  /// fake one).
  [[nodiscard]] static Result<DeviceMemory> allocate(const CudaApi& cuda, int device,
                                                     std::uint64_t size_bytes);

  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&&) = delete;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  /// Frees the memory; a failure to free is ignored (nothing could be done about it).
  ~DeviceMemory();

  /// The device address, for ferry::File reads and writes.
  void* pointer() const { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address_)); }
  int device() const { return device_; }
  std::uint64_t size_bytes() const { return size_bytes_; }

  /// Copies the first `size` bytes to host memory `dst`; returns when they are there. Errors: the driver's.
  [[nodiscard]] Status copy_to_host(void* dst, std::uint64_t size) const;
  /// Copies `size` bytes from host memory `src` to the start; returns when they are there. Errors: the driver's.
  [[nodiscard]] Status copy_from_host(const void* src, std::uint64_t size);
  /// Sets the first `size` bytes to `value`; returns when they are set. Errors: the driver's.
  [[nodiscard]] Status fill(std::uint8_t value, std::uint64_t size);

 private:
  DeviceMemory(const CudaApi* cuda, int device, unsigned long long address, std::uint64_t size_bytes)
      : cuda_(cuda), device_(device), address_(address), size_bytes_(size_bytes) {}
  const CudaApi* cuda_;
  int device_;
  unsigned long long address_;  // CUdeviceptr; 0 once moved from
  std::uint64_t size_bytes_;
};

/// Copies `size` bytes of device memory at `src` on GPU `device` (memory a tool did not allocate itself, such as
/// a tensor ferry::safetensors loaded) to host memory `dst`, through the process's CUDA driver. Errors: as
/// DeviceMemory::allocate for a missing driver or GPU, then the driver's.
[[nodiscard]] Status copy_device_to_host(int device, const void* src, void* dst, std::uint64_t size);

}  // namespace ferry::detail
