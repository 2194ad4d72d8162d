// Stream-ordered requests (File::read_async / write_async) on the real driver. Without nvcc there are no
// kernels: the work around a request is driver API work on the same stream (cuMemsetD8Async before, a
// cuMemcpyDtoHAsync after), and a host function that sleeps holds the stream to show that the request
// waits for earlier work. Skips with the driver's reason where no GPU is usable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "ferry/file.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/device_memory.hpp"
#include "support/test_files.hpp"

namespace fd = ferry::detail;
using ::testing::HasSubstr;

namespace ferry {
namespace {

constexpr std::uint64_t kSize = 9 * 1024 * 1024 + 12345;

// A stream on GPU 0 with its primary context current on this thread for the test's duration.
class StreamOrderGpu : public ::testing::TestWithParam<CompatMode> {
 protected:
  void SetUp() override {
    api_ = fd::process_cuda_api();
    if (api_ == nullptr) GTEST_SKIP() << "CUDA unusable here: " << fd::process_cuda_status().to_string();
    if (!api_->stream_ordering_status().ok()) GTEST_SKIP() << api_->stream_ordering_status().to_string();
    context_ = std::make_unique<fd::ScopedDeviceContext>(*api_, 0);
    ASSERT_TRUE(context_->status().ok()) << context_->status().to_string();
    ASSERT_EQ(api_->cuStreamCreate(&stream_, fd::CU_STREAM_NON_BLOCKING), fd::CUDA_SUCCESS);
    path_ = testing::write_pattern_file(testing::test_dir() / "data.bin", kSize);
    expected_ = testing::pattern(0, kSize);
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);
      EXPECT_EQ(api_->cuStreamDestroy_v2(stream_), fd::CUDA_SUCCESS);
      EXPECT_EQ(api_->cuCtxSynchronize(), fd::CUDA_SUCCESS) << "a sticky CUDA error after the test";
    }
    context_.reset();
  }
  File open(const char* mode) {
    Config c;
    c.set_compat_mode(GetParam()).set_task_size(1 << 20);
    auto f = File::open(path_, mode, c);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }
  // compat off needs cuFile to take this file: where it cannot, say why (the test then skips).
  bool route_usable(File& f, Direction direction = Direction::read) {
    testing::DeviceMemory probe(*api_, 4096);
    auto plan = f.prepare(probe.get(), 4096, direction);
    if (!plan.ok()) why_ = plan.status().to_string();
    return plan.ok();
  }
  std::string why_;

  const fd::CudaApi* api_ = nullptr;
  std::unique_ptr<fd::ScopedDeviceContext> context_;
  fd::CUstream stream_ = nullptr;
  std::string path_;
  std::vector<std::uint8_t> expected_;
};

void sleep_300ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

TEST_P(StreamOrderGpu, ReadSeesEarlierWorkAndLaterWorkSeesTheRead) {
  File f = open("r");
  if (!route_usable(f)) GTEST_SKIP() << why_;
  testing::DeviceMemory dev(*api_, kSize + 1);
  std::vector<std::uint8_t> after(kSize + 1, 0);
  // Pinned, so that the copy after the read is really asynchronous.
  ASSERT_EQ(api_->cuMemHostRegister_v2(after.data(), after.size(), 0), fd::CUDA_SUCCESS);
  ASSERT_EQ(api_->cuLaunchHostFunc(stream_, &sleep_300ms, nullptr), fd::CUDA_SUCCESS);  // hold the stream
  ASSERT_EQ(api_->cuMemsetD8Async(dev.address(), 0x11, kSize + 1, stream_), fd::CUDA_SUCCESS);
  auto started = std::chrono::steady_clock::now();
  Future fut = f.read_async(dev.get(), kSize, 0, stream_);
  ASSERT_EQ(api_->cuMemcpyDtoHAsync_v2(after.data(), dev.address(), kSize + 1, stream_), fd::CUDA_SUCCESS);
  auto queued = std::chrono::steady_clock::now() - started;
  EXPECT_LT(queued, std::chrono::milliseconds(200)) << "read_async blocked the calling thread";
  EXPECT_FALSE(fut.done()) << "the read began before the work queued before it";
  EXPECT_EQ(fut.bytes_done(), 0u);
  ASSERT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);
  EXPECT_TRUE(fut.done()) << "the stream went on before the request's future was done";
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kSize);
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), after.begin()))
      << "the copy after the read did not see its bytes, or the memset before it ran after it";
  EXPECT_EQ(after[kSize], 0x11);
  EXPECT_EQ(api_->cuMemHostUnregister(after.data()), fd::CUDA_SUCCESS);
}

TEST_P(StreamOrderGpu, ManyReadsOnOneStreamKeepTheirOrder) {
  File f = open("r");
  if (!route_usable(f)) GTEST_SKIP() << why_;
  constexpr std::uint64_t kPiece = 1 << 20;
  testing::DeviceMemory dev(*api_, kPiece);
  constexpr int kReads = 8;
  std::vector<std::uint8_t> copies(kReads * kPiece, 0);
  ASSERT_EQ(api_->cuMemHostRegister_v2(copies.data(), copies.size(), 0), fd::CUDA_SUCCESS);
  std::vector<Future> futures;
  for (int i = 0; i < kReads; ++i) {
    futures.push_back(f.read_async(dev.get(), kPiece, static_cast<std::uint64_t>(i) * kPiece, stream_));
    ASSERT_EQ(api_->cuMemcpyDtoHAsync_v2(copies.data() + i * kPiece, dev.address(), kPiece, stream_),
              fd::CUDA_SUCCESS);
  }
  ASSERT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);
  for (auto& fut : futures) ASSERT_TRUE(fut.get().ok());
  EXPECT_EQ(std::memcmp(copies.data(), expected_.data(), copies.size()), 0);
  EXPECT_EQ(api_->cuMemHostUnregister(copies.data()), fd::CUDA_SUCCESS);
}

TEST_P(StreamOrderGpu, WriteWaitsForTheWorkThatMakesItsData) {
  File f = open("r+");
  if (!route_usable(f, Direction::write)) GTEST_SKIP() << why_;
  constexpr std::uint64_t kBytes = 3 << 20;
  testing::DeviceMemory dev(*api_, kBytes, 0, 0);
  ASSERT_EQ(api_->cuLaunchHostFunc(stream_, &sleep_300ms, nullptr), fd::CUDA_SUCCESS);
  ASSERT_EQ(api_->cuMemsetD8Async(dev.address(), 0x5C, kBytes, stream_), fd::CUDA_SUCCESS);
  Future fut = f.write_async(dev.get(), kBytes, 4096, stream_);
  ASSERT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<std::uint8_t> back(kBytes);
  ASSERT_TRUE(f.pread(back.data(), kBytes, 4096).get().ok());
  EXPECT_EQ(back, std::vector<std::uint8_t>(kBytes, 0x5C)) << "the write ran before the memset";
}

TEST_P(StreamOrderGpu, AFailedReadReleasesTheStream) {
  File f = open("w");
  testing::DeviceMemory dev(*api_, 4096);
  Future fut = f.read_async(dev.get(), 4096, 0, stream_);
  ASSERT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);  // returns
  auto r = fut.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::failed_precondition);
}

INSTANTIATE_TEST_SUITE_P(Compat, StreamOrderGpu,
                         ::testing::Values(CompatMode::on, CompatMode::automatic, CompatMode::off),
                         [](const ::testing::TestParamInfo<CompatMode>& info) {
                           return std::string("compat_") + (info.param == CompatMode::automatic ? "auto"
                                                            : info.param == CompatMode::on     ? "on"
                                                                                               : "off");
                         });

}  // namespace
}  // namespace ferry
