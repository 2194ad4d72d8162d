// Device memory for GPU tests: allocated on a chosen GPU, filled with a poison byte so that bytes a
// request must not touch can be checked, copied back and forth with the driver's synchronous copies.
// The calling thread's current context is left as it was (tests check that Ferry does the same).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry::testing {

class DeviceMemory {
 public:
  static constexpr std::uint8_t kPoison = 0xA5;

  DeviceMemory(const detail::CudaApi& api, std::uint64_t size, int device = 0, std::uint8_t fill = kPoison)
      : api_(api), size_(size), device_(device) {
    detail::ScopedDeviceContext context(api_, device_);
    EXPECT_TRUE(context.status().ok()) << context.status().to_string();
    EXPECT_EQ(api_.cuMemAlloc_v2(&ptr_, std::max<std::uint64_t>(size, 1)), detail::CUDA_SUCCESS);
    EXPECT_EQ(api_.cuMemsetD8_v2(ptr_, fill, std::max<std::uint64_t>(size, 1)), detail::CUDA_SUCCESS);
    EXPECT_EQ(api_.cuCtxSynchronize(), detail::CUDA_SUCCESS);
  }
  ~DeviceMemory() {
    if (ptr_ == 0) return;
    detail::ScopedDeviceContext context(api_, device_);
    (void)api_.cuMemFree_v2(ptr_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* get() const { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr_)); }
  detail::CUdeviceptr address() const { return ptr_; }
  std::uint64_t size() const { return size_; }
  /// Frees the memory now (the pointer stays, dangling, for tests of freed memory).
  void free_now() {
    detail::ScopedDeviceContext context(api_, device_);
    EXPECT_EQ(api_.cuMemFree_v2(ptr_), detail::CUDA_SUCCESS);
    ptr_ = 0;
  }
  std::vector<std::uint8_t> to_host() const {
    std::vector<std::uint8_t> out(size_);
    detail::ScopedDeviceContext context(api_, device_);
    if (size_) {
      EXPECT_EQ(api_.cuMemcpyDtoH_v2(out.data(), ptr_, size_), detail::CUDA_SUCCESS);
    }
    return out;
  }
  void from_host(const std::vector<std::uint8_t>& in) {
    detail::ScopedDeviceContext context(api_, device_);
    if (!in.empty()) {
      EXPECT_EQ(api_.cuMemcpyHtoD_v2(ptr_, in.data(), in.size()), detail::CUDA_SUCCESS);
    }
  }

 private:
  const detail::CudaApi& api_;
  std::uint64_t size_;
  int device_;
  detail::CUdeviceptr ptr_ = 0;
};

}  // namespace ferry::testing
