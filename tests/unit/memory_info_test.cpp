// describe_memory, synchronize_stream and cuda_driver_status: the public checks the Python layer makes with
// Ferry's own driver table. Without a driver (the CPU machine) each says why; with one (the GPU machine's CPU
// tests), memory CUDA has never seen is host-pageable memory.
#include "ferry/memory.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "support/status_matchers.hpp"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using testing::StatusIs;

TEST(MemoryInfo, EachCheckSaysWhyWithoutADriverAndDescribesHostMemoryWithOne) {
  std::vector<char> host(64);
  Status driver = cuda_driver_status();
  auto info = describe_memory(host.data());
  if (!driver.ok()) {
    EXPECT_THAT(driver, StatusIs(ErrorCode::unavailable));
    EXPECT_THAT(info.status(), StatusIs(ErrorCode::unavailable));
    EXPECT_EQ(info.status().message(), driver.message()) << "the loader's reason, once";
    EXPECT_THAT(synchronize_stream(nullptr, 0), StatusIs(ErrorCode::unavailable));
    return;
  }
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->kind, "host-pageable");
  EXPECT_EQ(info->device, -1);
  EXPECT_EQ(info->allocation_size, 0u);
}

}  // namespace
}  // namespace ferry
