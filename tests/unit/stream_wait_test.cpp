// wait_for_stream: it returns only once the stream's work has run, on a driver that runs it on its own
// (autonomous) or only when asked (deferred copies), and it passes on the driver's error.
#include "platform/cuda/stream_wait.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "platform/cuda/primary_context.hpp"
#include "support/fake_cuda.hpp"

namespace ferry {
namespace {

namespace fd = ferry::detail;
namespace ft = ferry::testing;

class StreamWait : public ::testing::Test {
 protected:
  void SetUp() override { ft::reset_fake_cuda(); }
  void TearDown() override { ft::reset_fake_cuda(); }

  // Queues a copy of 4 KiB of `fill` into new device memory on a new stream, waits, and returns what landed.
  std::vector<char> copy_and_wait(char fill, fd::CUresult* waited) {
    const fd::CudaApi& api = ft::fake_cuda_api();
    EXPECT_TRUE(fd::make_current(api, 0).ok());
    fd::CUdeviceptr dev = 0;
    EXPECT_EQ(api.cuMemAlloc_v2(&dev, kBytes), fd::CUDA_SUCCESS);
    EXPECT_EQ(api.cuMemsetD8_v2(dev, 0, kBytes), fd::CUDA_SUCCESS);
    fd::CUstream stream = nullptr;
    EXPECT_EQ(api.cuStreamCreate(&stream, fd::CU_STREAM_NON_BLOCKING), fd::CUDA_SUCCESS);
    std::vector<char> bounce(kBytes, fill);
    EXPECT_EQ(api.cuMemcpyHtoDAsync_v2(dev, bounce.data(), kBytes, stream), fd::CUDA_SUCCESS);
    *waited = fd::wait_for_stream(api, stream);
    std::vector<char> landed(reinterpret_cast<char*>(dev), reinterpret_cast<char*>(dev) + kBytes);
    std::memset(bounce.data(), 'x', kBytes);  // the copy must be over: this must not reach the device
    EXPECT_EQ(reinterpret_cast<char*>(dev)[0], landed[0]);
    EXPECT_EQ(api.cuStreamDestroy_v2(stream), fd::CUDA_SUCCESS);
    EXPECT_EQ(api.cuMemFree_v2(dev), fd::CUDA_SUCCESS);
    return landed;
  }
  void expect_copy_landed(char fill) {
    fd::CUresult waited = fd::CUDA_ERROR_UNKNOWN;
    auto landed = copy_and_wait(fill, &waited);
    EXPECT_EQ(waited, fd::CUDA_SUCCESS);
    EXPECT_EQ(landed, std::vector<char>(kBytes, fill));
  }
  static constexpr std::size_t kBytes = 4096;
};

TEST_F(StreamWait, ReturnsOnceADeferredCopyHasLanded) {
  ft::fake_cuda_script().copy_mode = ft::FakeCopyMode::deferred;
  expect_copy_landed('d');
  EXPECT_EQ(ft::fake_cuda_pending_copies(), 0u);
  EXPECT_EQ(ft::fake_cuda_counters().stream_syncs, 0u) << "it asks the stream instead of synchronising it";
  EXPECT_GE(ft::fake_cuda_counters().stream_queries, 2u) << "the first query found the copy still queued";
}

TEST_F(StreamWait, ReturnsOnceADeviceThatRunsOnItsOwnHasDoneTheCopy) {
  ft::fake_cuda_script().device_mode = ft::FakeDeviceMode::autonomous;
  expect_copy_landed('a');
}

TEST_F(StreamWait, PassesOnTheDriversErrorForTheStreamsWork) {
  ft::fake_cuda_script().copy_mode = ft::FakeCopyMode::deferred;
  ft::fake_cuda_script().fail("cuStreamQuery", fd::CUDA_ERROR_ILLEGAL_ADDRESS);
  const fd::CudaApi& api = ft::fake_cuda_api();
  ASSERT_TRUE(fd::make_current(api, 0).ok());
  fd::CUstream stream = nullptr;
  ASSERT_EQ(api.cuStreamCreate(&stream, fd::CU_STREAM_NON_BLOCKING), fd::CUDA_SUCCESS);
  EXPECT_EQ(fd::wait_for_stream(api, stream), fd::CUDA_ERROR_ILLEGAL_ADDRESS);
  ft::fake_cuda_script().failures.clear();
  EXPECT_EQ(api.cuStreamDestroy_v2(stream), fd::CUDA_SUCCESS);
}

}  // namespace
}  // namespace ferry
