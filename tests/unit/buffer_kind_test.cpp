#include "platform/cuda/buffer_kind.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "platform/cuda/primary_context.hpp"
#include "support/fake_cuda.hpp"
#include "support/status_matchers.hpp"

using ferry::testing::StatusIs;

namespace fd = ferry::detail;
namespace ft = ferry::testing;
using ::testing::HasSubstr;

namespace {

class BufferKindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ft::reset_fake_cuda();
    api_ = &ft::fake_cuda_api();
  }
  void TearDown() override { ft::reset_fake_cuda(); }
  const fd::CudaApi* api_ = nullptr;
};

}  // namespace

TEST(BufferKind, WithoutCudaEverythingIsHostPageable) {
  std::vector<char> host(64);
  auto kind = fd::classify_buffer(nullptr, host.data());
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(kind->kind, fd::MemoryKind::host_pageable);
  EXPECT_EQ(kind->device, -1);
  EXPECT_TRUE(kind->is_host());
}

// A batch skips the driver for pieces its last classification holds: an address past the allocation's end
// must not be held (it was, through unsigned wrap-around, and a host piece laid out above a device buffer
// was taken for device memory: Batch.BadPiecesAreRefusedBeforeAnyIoNamingTheirIndex failed by heap layout).
TEST(BufferKind, HoldsOnlyAddressesInsideTheAllocation) {
  fd::BufferKind k;
  k.kind = fd::MemoryKind::device;
  k.range_start = 0x10000;
  k.range_size = 0x1000;
  EXPECT_TRUE(k.holds(0x10000, 0x1000));
  EXPECT_TRUE(k.holds(0x10800, 0x800));
  EXPECT_TRUE(k.holds(0x11000, 0));
  EXPECT_FALSE(k.holds(0x10800, 0x801));
  EXPECT_FALSE(k.holds(0x20000, 16)) << "past the end";
  EXPECT_FALSE(k.holds(0x11001, 0));
  EXPECT_FALSE(k.holds(0xF000, 16)) << "before the start";
  EXPECT_FALSE(k.holds(0x10000, ~0ull));
  k.range_size = 0;
  EXPECT_FALSE(k.holds(0x10000, 1)) << "host memory has no allocation range";
}

TEST_F(BufferKindTest, UnregisteredHostMemoryIsPageableNotAnError) {
  std::vector<char> host(4096);
  auto kind = fd::classify_buffer(api_, host.data());
  ASSERT_TRUE(kind.ok()) << kind.status().to_string();
  EXPECT_EQ(kind->kind, fd::MemoryKind::host_pageable);
  int on_stack = 0;
  EXPECT_EQ(fd::classify_buffer(api_, &on_stack)->kind, fd::MemoryKind::host_pageable);
}

TEST_F(BufferKindTest, DeviceMemoryReportsItsDevice) {
  ft::fake_cuda_script().device_count = 2;
  ASSERT_TRUE(fd::make_current(*api_, 1).ok());
  fd::CUdeviceptr ptr = 0;
  ASSERT_EQ(api_->cuMemAlloc_v2(&ptr, 1 << 20), fd::CUDA_SUCCESS);
  auto kind = fd::classify_buffer(api_, reinterpret_cast<void*>(ptr));
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(kind->kind, fd::MemoryKind::device);
  EXPECT_EQ(kind->device, 1);
  EXPECT_FALSE(kind->is_host());
  // An address inside the allocation is device memory too.
  EXPECT_EQ(fd::classify_buffer(api_, reinterpret_cast<char*>(ptr) + 4096)->kind, fd::MemoryKind::device);
  EXPECT_EQ(api_->cuMemFree_v2(ptr), fd::CUDA_SUCCESS);
}

TEST_F(BufferKindTest, PinnedAndRegisteredHostMemoryArePinned) {
  ASSERT_TRUE(fd::make_current(*api_, 0).ok());
  void* pinned = nullptr;
  ASSERT_EQ(api_->cuMemHostAlloc(&pinned, 8192, fd::kMemHostAllocPortable), fd::CUDA_SUCCESS);
  EXPECT_EQ(fd::classify_buffer(api_, pinned)->kind, fd::MemoryKind::host_pinned);
  EXPECT_EQ(ft::fake_cuda_live_pinned(), 1u);
  EXPECT_EQ(api_->cuMemFreeHost(pinned), fd::CUDA_SUCCESS);

  std::vector<char> host(8192);
  ASSERT_EQ(api_->cuMemHostRegister_v2(host.data(), host.size(), 0), fd::CUDA_SUCCESS);
  EXPECT_EQ(fd::classify_buffer(api_, host.data() + 100)->kind, fd::MemoryKind::host_pinned);
  ASSERT_EQ(api_->cuMemHostUnregister(host.data()), fd::CUDA_SUCCESS);
  EXPECT_EQ(fd::classify_buffer(api_, host.data())->kind, fd::MemoryKind::host_pageable);
  EXPECT_EQ(ft::fake_cuda_live_pinned(), 0u);
}

TEST_F(BufferKindTest, ManagedMemoryIsManaged) {
  void* managed = ft::fake_cuda_alloc_managed(4096, 0);
  auto kind = fd::classify_buffer(api_, managed);
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(kind->kind, fd::MemoryKind::managed);
  EXPECT_EQ(kind->device, 0);
  ft::fake_cuda_free(managed);
}

TEST_F(BufferKindTest, DriverFailureIsAnErrorWithTheDriversWords) {
  ft::fake_cuda_script().fail("cuPointerGetAttributes", fd::CUDA_ERROR_NOT_INITIALIZED);
  std::vector<char> host(16);
  auto kind = fd::classify_buffer(api_, host.data());
  ASSERT_THAT(kind, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT(kind.status().message(),
              HasSubstr("cuPointerGetAttributes failed: CUDA_ERROR_NOT_INITIALIZED (initialization error)"));
}

TEST(BufferKind, KindNamesAreStable) {
  EXPECT_STREQ(fd::memory_kind_name(fd::MemoryKind::host_pageable), "host-pageable");
  EXPECT_STREQ(fd::memory_kind_name(fd::MemoryKind::host_pinned), "host-pinned");
  EXPECT_STREQ(fd::memory_kind_name(fd::MemoryKind::device), "device");
  EXPECT_STREQ(fd::memory_kind_name(fd::MemoryKind::managed), "managed");
}
