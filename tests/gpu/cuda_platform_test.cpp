// The CUDA platform layer against the real driver: loading, devices, buffer classification, contexts and
// copies. Skips with the loader's or cuInit's own reason where no GPU is usable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

#include "platform/cuda/buffer_kind.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

namespace fd = ferry::detail;
using ::testing::HasSubstr;

namespace {

#define FERRY_REQUIRE_CUDA_(api)                                                           \
  const fd::CudaApi* api = fd::process_cuda_api();                                         \
  if (api == nullptr) GTEST_SKIP() << "CUDA unusable here: " << fd::process_cuda_status().to_string()

void* as_pointer(fd::CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }

}  // namespace

TEST(CudaPlatform, LoadsEverySymbolAndInitialises) {
  FERRY_REQUIRE_CUDA_(api);
  EXPECT_TRUE(api->complete());
  EXPECT_EQ(api->library, "libcuda.so.1");
  int version = 0;
  ASSERT_EQ(api->cuDriverGetVersion(&version), fd::CUDA_SUCCESS);
  EXPECT_GE(version, 12000);
}

TEST(CudaPlatform, ListsDevicesWithNameBusIdAndMemory) {
  FERRY_REQUIRE_CUDA_(api);
  auto devices = fd::list_devices(*api);
  ASSERT_TRUE(devices.ok()) << devices.status().to_string();
  ASSERT_FALSE(devices->empty());
  for (const fd::DeviceInfo& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_THAT(d.pci_bus_id, HasSubstr(":"));
    EXPECT_GT(d.total_memory_bytes, 1ull << 30);
    EXPECT_GE(d.pci_bus, 0);
    EXPECT_GE(d.compute_capability_major, 7);
    std::cout << "device " << d.ordinal << ": " << d.name << " " << d.pci_bus_id << " "
              << (d.total_memory_bytes >> 20) << " MiB, NUMA " << d.numa_id << ", host NUMA " << d.host_numa_id
              << "\n";
  }
}

TEST(CudaPlatform, ErrorTextComesFromTheDriver) {
  FERRY_REQUIRE_CUDA_(api);
  EXPECT_EQ(fd::cuda_check(*api, fd::CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoDAsync").message(),
            "cuMemcpyHtoDAsync failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  EXPECT_THAT(fd::cuda_error_text(*api, fd::CUDA_ERROR_NO_DEVICE), HasSubstr("CUDA_ERROR_NO_DEVICE"));
}

TEST(CudaPlatform, ClassifiesEveryKindOfBuffer) {
  FERRY_REQUIRE_CUDA_(api);
  ASSERT_TRUE(fd::make_current(*api, 0).ok());

  std::vector<char> pageable(1 << 16);
  auto kind = fd::classify_buffer(api, pageable.data());
  ASSERT_TRUE(kind.ok()) << kind.status().to_string();
  EXPECT_EQ(kind->kind, fd::MemoryKind::host_pageable);

  fd::CUdeviceptr device = 0;
  ASSERT_EQ(api->cuMemAlloc_v2(&device, 1 << 20), fd::CUDA_SUCCESS);
  kind = fd::classify_buffer(api, as_pointer(device + 4096));
  ASSERT_TRUE(kind.ok()) << kind.status().to_string();
  EXPECT_EQ(kind->kind, fd::MemoryKind::device);
  EXPECT_EQ(kind->device, 0);

  void* pinned = nullptr;
  ASSERT_EQ(api->cuMemHostAlloc(&pinned, 1 << 20, fd::kMemHostAllocPortable), fd::CUDA_SUCCESS);
  EXPECT_EQ(fd::classify_buffer(api, pinned)->kind, fd::MemoryKind::host_pinned);

  ASSERT_EQ(api->cuMemHostRegister_v2(pageable.data(), pageable.size(), fd::kMemHostRegisterPortable),
            fd::CUDA_SUCCESS);
  EXPECT_EQ(fd::classify_buffer(api, pageable.data())->kind, fd::MemoryKind::host_pinned);
  ASSERT_EQ(api->cuMemHostUnregister(pageable.data()), fd::CUDA_SUCCESS);
  EXPECT_EQ(fd::classify_buffer(api, pageable.data())->kind, fd::MemoryKind::host_pageable);

  // Worker threads classify before they make a context current: that must work too.
  std::thread other([&] {
    auto on_other = fd::classify_buffer(api, as_pointer(device));
    EXPECT_TRUE(on_other.ok()) << on_other.status().to_string();
    if (on_other.ok()) {
      EXPECT_EQ(on_other->kind, fd::MemoryKind::device);
    }
    auto host_other = fd::classify_buffer(api, pageable.data());
    EXPECT_TRUE(host_other.ok()) << host_other.status().to_string();
  });
  other.join();

  EXPECT_EQ(api->cuMemFreeHost(pinned), fd::CUDA_SUCCESS);
  EXPECT_EQ(api->cuMemFree_v2(device), fd::CUDA_SUCCESS);
}

TEST(CudaPlatform, AsyncCopiesRoundTripThroughPinnedMemory) {
  FERRY_REQUIRE_CUDA_(api);
  ASSERT_TRUE(fd::make_current(*api, 0).ok());
  constexpr std::size_t kBytes = 4 << 20;
  void* up = nullptr;
  void* down = nullptr;
  ASSERT_EQ(api->cuMemHostAlloc(&up, kBytes, 0), fd::CUDA_SUCCESS);
  ASSERT_EQ(api->cuMemHostAlloc(&down, kBytes, 0), fd::CUDA_SUCCESS);
  for (std::size_t i = 0; i < kBytes; ++i) static_cast<unsigned char*>(up)[i] = static_cast<unsigned char>(i * 7);
  std::memset(down, 0, kBytes);
  fd::CUdeviceptr device = 0;
  ASSERT_EQ(api->cuMemAlloc_v2(&device, kBytes), fd::CUDA_SUCCESS);
  fd::CUstream stream = nullptr;
  ASSERT_EQ(api->cuStreamCreate(&stream, fd::CU_STREAM_NON_BLOCKING), fd::CUDA_SUCCESS);
  fd::CUevent event = nullptr;
  ASSERT_EQ(api->cuEventCreate(&event, fd::CU_EVENT_DISABLE_TIMING), fd::CUDA_SUCCESS);

  ASSERT_EQ(api->cuMemcpyHtoDAsync_v2(device, up, kBytes, stream), fd::CUDA_SUCCESS);
  ASSERT_EQ(api->cuMemcpyDtoHAsync_v2(down, device, kBytes, stream), fd::CUDA_SUCCESS);
  ASSERT_EQ(api->cuEventRecord(event, stream), fd::CUDA_SUCCESS);
  ASSERT_EQ(api->cuEventSynchronize(event), fd::CUDA_SUCCESS);
  EXPECT_EQ(api->cuEventQuery(event), fd::CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(up, down, kBytes), 0);

  EXPECT_EQ(api->cuEventDestroy_v2(event), fd::CUDA_SUCCESS);
  EXPECT_EQ(api->cuStreamDestroy_v2(stream), fd::CUDA_SUCCESS);
  EXPECT_EQ(api->cuMemFree_v2(device), fd::CUDA_SUCCESS);
  EXPECT_EQ(api->cuMemFreeHost(up), fd::CUDA_SUCCESS);
  EXPECT_EQ(api->cuMemFreeHost(down), fd::CUDA_SUCCESS);
}

TEST(CudaPlatform, WorkerThreadsShareTheRetainedPrimaryContext) {
  FERRY_REQUIRE_CUDA_(api);
  auto context = fd::primary_context(*api, 0);
  ASSERT_TRUE(context.ok()) << context.status().to_string();
  fd::CUcontext seen = nullptr;
  std::thread worker([&] {
    EXPECT_TRUE(fd::make_current(*api, 0).ok());
    api->cuCtxGetCurrent(&seen);
  });
  worker.join();
  EXPECT_EQ(seen, *context);
  EXPECT_EQ(fd::make_current(*api, 99).code(), ferry::ErrorCode::invalid_argument);
}
