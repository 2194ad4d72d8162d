#include "platform/cuda/cuda_api.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "platform/cuda/primary_context.hpp"
#include "support/fake_cuda.hpp"
#include "support/status_matchers.hpp"

using ferry::testing::StatusIs;

namespace fd = ferry::detail;
namespace ft = ferry::testing;
using ::testing::HasSubstr;

TEST(CudaApi, MissingLibraryIsUnavailableAndNamed) {
  auto api = fd::CudaApi::load("libferry-no-such-cuda.so.1");
  ASSERT_THAT(api, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT(api.status().message(), HasSubstr("libferry-no-such-cuda.so.1 not found: "));
}

TEST(CudaApi, LibraryWithoutTheSymbolsNamesTheFirstMissingOne) {
  auto api = fd::CudaApi::load("libm.so.6");
  ASSERT_THAT(api, StatusIs(ferry::ErrorCode::unavailable));
  EXPECT_THAT(api.status().message(), HasSubstr("libm.so.6 has no symbol cuInit: "));
}

TEST(CudaApi, ProcessStatusExplainsANullTable) {
  const fd::CudaApi* api = fd::process_cuda_api();
  ferry::Status status = fd::process_cuda_status();
  if (api != nullptr) {
    EXPECT_TRUE(status.ok());
    EXPECT_TRUE(api->complete());
  } else {
    EXPECT_EQ(status.code(), ferry::ErrorCode::unavailable);
    EXPECT_FALSE(status.message().empty());
  }
  EXPECT_EQ(fd::process_cuda_api(), api);  // loaded once
}

TEST(CudaApi, CheckNamesTheCallAndTheDriversWords) {
  const fd::CudaApi& api = ft::fake_cuda_api();
  EXPECT_TRUE(fd::cuda_check(api, fd::CUDA_SUCCESS, "cuInit").ok());
  ferry::Status s = fd::cuda_check(api, fd::CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoDAsync");
  EXPECT_EQ(s.code(), ferry::ErrorCode::invalid_argument);
  EXPECT_EQ(s.message(), "cuMemcpyHtoDAsync failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  EXPECT_EQ(fd::cuda_check(api, fd::CUDA_ERROR_NO_DEVICE, "cuInit").code(), ferry::ErrorCode::unavailable);
  EXPECT_EQ(fd::cuda_check(api, fd::CUDA_ERROR_INVALID_HANDLE, "cuStreamSynchronize").code(),
            ferry::ErrorCode::internal);
  EXPECT_EQ(fd::cuda_check(api, fd::CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize").code(),
            ferry::ErrorCode::io_error);
  EXPECT_EQ(fd::cuda_error_text(api, static_cast<fd::CUresult>(4242)), "CUDA error 4242");
}

TEST(CudaApi, FakeTableIsComplete) { EXPECT_TRUE(ft::fake_cuda_api().complete()); }

class PrimaryContextTest : public ::testing::Test {
 protected:
  void SetUp() override { ft::reset_fake_cuda(); }
  void TearDown() override { ft::reset_fake_cuda(); }
  const fd::CudaApi& api_ = ft::fake_cuda_api();
};

TEST_F(PrimaryContextTest, ListsDevicesWithNameBusIdAndMemory) {
  ft::fake_cuda_script().device_count = 2;
  auto devices = fd::list_devices(api_);
  ASSERT_TRUE(devices.ok()) << devices.status().to_string();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[1].ordinal, 1);
  EXPECT_EQ((*devices)[1].name, "Fake GPU 1");
  EXPECT_EQ((*devices)[1].pci_bus_id, "0000:11:00.0");
  EXPECT_EQ((*devices)[1].pci_bus, 0x11);
  EXPECT_EQ((*devices)[0].total_memory_bytes, 80ull << 30);
  EXPECT_EQ((*devices)[0].numa_id, -1);  // the fake answers like a driver without the attribute
}

TEST_F(PrimaryContextTest, BadOrdinalIsInvalidArgument) {
  auto info = fd::describe_device(api_, 3);
  ASSERT_THAT(info, StatusIs(ferry::ErrorCode::invalid_argument));
  EXPECT_THAT(info.status().message(), HasSubstr("CUDA device 3 does not exist (1 device(s) present)"));
  EXPECT_EQ(fd::make_current(api_, -1).code(), ferry::ErrorCode::invalid_argument);
}

TEST_F(PrimaryContextTest, RetainsOncePerProcessFromManyThreads) {
  std::vector<std::thread> threads;
  std::vector<ferry::Status> results(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      results[i] = fd::make_current(api_, 0);
      fd::CUcontext current = nullptr;
      api_.cuCtxGetCurrent(&current);
      if (results[i].ok() && current == nullptr) results[i] = ferry::Status(ferry::ErrorCode::internal, "not current");
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.to_string();
  EXPECT_EQ(ft::fake_cuda_counters().context_retains, 1u);
}

TEST_F(PrimaryContextTest, MakeCurrentSkipsTheDriverWhenAlreadyCurrent) {
  ASSERT_TRUE(fd::make_current(api_, 0).ok());
  ASSERT_TRUE(fd::make_current(api_, 0).ok());
  EXPECT_EQ(ft::fake_cuda_counters().set_current_calls, 1u);
}

TEST_F(PrimaryContextTest, FakeRefusesWorkWithoutACurrentContext) {
  fd::CUdeviceptr ptr = 0;
  EXPECT_EQ(api_.cuMemAlloc_v2(&ptr, 64), fd::CUDA_ERROR_INVALID_CONTEXT);
}

class FakeCudaTest : public PrimaryContextTest {
 protected:
  void SetUp() override {
    PrimaryContextTest::SetUp();
    ASSERT_TRUE(fd::make_current(api_, 0).ok());
  }
};

TEST_F(FakeCudaTest, DeferredCopiesLandOnlyAtSynchronisation) {
  ft::fake_cuda_script().copy_mode = ft::FakeCopyMode::deferred;
  fd::CUdeviceptr dev = 0;
  ASSERT_EQ(api_.cuMemAlloc_v2(&dev, 16), fd::CUDA_SUCCESS);
  ASSERT_EQ(api_.cuMemsetD8_v2(dev, 0, 16), fd::CUDA_SUCCESS);
  fd::CUstream stream = nullptr;
  ASSERT_EQ(api_.cuStreamCreate(&stream, fd::CU_STREAM_NON_BLOCKING), fd::CUDA_SUCCESS);
  fd::CUevent event = nullptr;
  ASSERT_EQ(api_.cuEventCreate(&event, fd::CU_EVENT_DISABLE_TIMING), fd::CUDA_SUCCESS);

  char bounce[16];
  std::memset(bounce, 'a', sizeof bounce);
  ASSERT_EQ(api_.cuMemcpyHtoDAsync_v2(dev, bounce, sizeof bounce, stream), fd::CUDA_SUCCESS);
  ASSERT_EQ(api_.cuEventRecord(event, stream), fd::CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<char*>(dev)[0], 0);  // not yet
  EXPECT_EQ(ft::fake_cuda_pending_copies(), 1u);
  // Reusing the bounce buffer before the event completes is the bug this mode exists to expose.
  std::memset(bounce, 'b', sizeof bounce);
  EXPECT_EQ(api_.cuEventQuery(event), fd::CUDA_ERROR_NOT_READY);
  EXPECT_EQ(api_.cuEventQuery(event), fd::CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<char*>(dev)[0], 'b');

  std::memset(bounce, 'c', sizeof bounce);
  ASSERT_EQ(api_.cuMemcpyHtoDAsync_v2(dev, bounce, sizeof bounce, stream), fd::CUDA_SUCCESS);
  ASSERT_EQ(api_.cuStreamSynchronize(stream), fd::CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<char*>(dev)[15], 'c');
  EXPECT_EQ(ft::fake_cuda_pending_copies(), 0u);

  EXPECT_EQ(api_.cuEventDestroy_v2(event), fd::CUDA_SUCCESS);
  EXPECT_EQ(api_.cuStreamDestroy_v2(stream), fd::CUDA_SUCCESS);
  EXPECT_EQ(api_.cuMemFree_v2(dev), fd::CUDA_SUCCESS);
  auto counters = ft::fake_cuda_counters();
  EXPECT_EQ(counters.htod_async_copies, 2u);
  EXPECT_EQ(counters.htod_bytes, 32u);
  EXPECT_EQ(counters.streams_created, counters.streams_destroyed);
}

TEST_F(FakeCudaTest, CopiesOutsideAnAllocationAreInvalid) {
  fd::CUdeviceptr dev = 0;
  ASSERT_EQ(api_.cuMemAlloc_v2(&dev, 16), fd::CUDA_SUCCESS);
  char host[32] = {};
  EXPECT_EQ(api_.cuMemcpyHtoD_v2(dev, host, 32), fd::CUDA_ERROR_INVALID_VALUE);  // overrun
  EXPECT_EQ(api_.cuMemcpyHtoD_v2(reinterpret_cast<fd::CUdeviceptr>(host), host, 8),
            fd::CUDA_ERROR_INVALID_VALUE);  // host pointer passed as device pointer
  EXPECT_EQ(api_.cuMemFree_v2(dev), fd::CUDA_SUCCESS);
}

TEST_F(FakeCudaTest, ScriptedFailuresCountDown) {
  ft::fake_cuda_script().fail("cuStreamCreate", fd::CUDA_ERROR_OUT_OF_MEMORY, 1);
  fd::CUstream stream = nullptr;
  EXPECT_EQ(api_.cuStreamCreate(&stream, 0), fd::CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(api_.cuStreamCreate(&stream, 0), fd::CUDA_SUCCESS);
  EXPECT_EQ(api_.cuStreamDestroy_v2(stream), fd::CUDA_SUCCESS);
}
