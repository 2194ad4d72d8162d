// Stream-ordered requests (File::read_async / write_async) on the fake CUDA driver, whose streams run
// queued work only when synchronised: so each test can look at the buffer and the future before the
// stream reaches the request, then synchronise and check that the work queued before it happened first and
// the work queued after it saw its bytes. The same orderings run on a real GPU in
// tests/gpu/stream_order_gpu_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backends/staging_pool.hpp"
#include "file/open_options.hpp"
#include "file/stream_order.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/test_files.hpp"

using ::testing::HasSubstr;

namespace ferry {
namespace {

using detail::CUDA_ERROR_NOT_SUPPORTED;
using detail::CUDA_SUCCESS;
using detail::CUdeviceptr;
using detail::CUstream;
using testing::FakeCopyMode;

class StreamOrder : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kTask = 64 * 1024;
  static constexpr std::uint64_t kSize = 5 * kTask + 123;

  void SetUp() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    testing::fake_cuda_script().copy_mode = FakeCopyMode::deferred;  // nothing runs until synchronised
    dir_ = testing::test_dir();
    ASSERT_TRUE(detail::make_current(api(), 0).ok());
    ASSERT_EQ(api().cuStreamCreate(&stream_, 0), CUDA_SUCCESS);
    path_ = testing::write_pattern_file(dir_ / "data.bin", kSize);
    expected_ = testing::pattern(0, kSize);
  }
  void TearDown() override {
    EXPECT_EQ(api().cuStreamDestroy_v2(stream_), CUDA_SUCCESS);
    detail::process_staging_pool().clear();
    detail::release_stream_flags_for_testing(api());
    EXPECT_EQ(testing::fake_cuda_pending_copies(), 0u) << "work still queued";
    EXPECT_EQ(testing::fake_cuda_live_pinned(), 0u) << "pinned memory leaked";
    (void)api().cuCtxSetCurrent(nullptr);
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }

  static const detail::CudaApi& api() { return testing::fake_cuda_api(); }

  File open(const char* mode, CompatMode compat = CompatMode::on) {
    Config c;
    c.set_compat_mode(compat).set_task_size(kTask).set_bounce_buffer_size(kTask).set_threads(3);
    detail::OpenOptions o;
    o.gpu = &testing::fake_gpu_platform();
    auto f = detail::open_file(path_, mode, c, o);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }

  // Before: memset the device buffer to 0x11; the request; after: copy the device buffer to the host.
  // Returns the future, unsynchronised.
  Future queue_read(File& f, void* dev, std::vector<std::uint8_t>* host_after, std::uint64_t size = kSize) {
    auto d = reinterpret_cast<CUdeviceptr>(dev);
    EXPECT_EQ(api().cuMemsetD8Async(d, 0x11, size + 1, stream_), CUDA_SUCCESS);
    Future fut = f.read_async(dev, size, 0, stream_);
    host_after->assign(size + 1, 0);
    EXPECT_EQ(api().cuMemcpyDtoHAsync_v2(host_after->data(), d, size + 1, stream_), CUDA_SUCCESS);
    return fut;
  }

  std::filesystem::path dir_;
  std::string path_;
  std::vector<std::uint8_t> expected_;
  CUstream stream_ = nullptr;
};

TEST_F(StreamOrder, StagedReadBeginsAfterEarlierWorkAndLaterWorkSeesItsBytes) {
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::memset(dev, 0xA5, kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  // The calling thread did not wait, and the stream has not reached the request: nothing was read.
  EXPECT_FALSE(fut.done());
  EXPECT_EQ(fut.bytes_done(), 0u);
  EXPECT_EQ(static_cast<std::uint8_t*>(dev)[0], 0xA5) << "the memset queued before ran early";
  EXPECT_EQ(testing::fake_cuda_counters().host_functions_run, 0u);

  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_TRUE(fut.done()) << "the future must be done before the stream goes on";
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), after.begin()))
      << "the copy queued after the request did not see its bytes (or the memset ran after the read)";
  EXPECT_EQ(fut.bytes_done(), kSize);
  EXPECT_EQ(after[kSize], 0x11) << "the byte past the request is the memset's";
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kSize);
  EXPECT_EQ(r->report.at(Route::staged).ops, r->report.total_ops());
  auto c = testing::fake_cuda_counters();
  EXPECT_EQ(c.host_functions_queued, 1u);
  EXPECT_EQ(c.stream_waits, 1u);
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrder, CuFileReadIsOrderedToo) {
  File f = open("r", CompatMode::off);
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  EXPECT_FALSE(fut.done());
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), after.begin()));
  EXPECT_GT(r->report.total_ops(), r->report.at(Route::staged).ops) << "expected cuFile routes";
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrder, HostBufferReadFeedsALaterCopyOnTheStream) {
  File f = open("r");
  std::vector<std::uint8_t> host(kSize, 0);
  void* dev = testing::fake_cuda_alloc_device(kSize);
  Future fut = f.read_async(host.data(), kSize, 0, stream_);
  ASSERT_EQ(api().cuMemcpyHtoDAsync_v2(reinterpret_cast<CUdeviceptr>(dev), host.data(), kSize, stream_),
            CUDA_SUCCESS);
  EXPECT_EQ(host[0], 0) << "read before the stream reached it";
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->report.at(Route::host).ops, r->report.total_ops());
  EXPECT_EQ(std::memcmp(dev, expected_.data(), kSize), 0);
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrder, WriteBeginsAfterTheWorkThatProducesItsData) {
  File f = open("r+");
  void* dev = testing::fake_cuda_alloc_device(kTask);
  std::memset(dev, 0, kTask);
  // The "kernel" producing the data is a memset queued before the write.
  ASSERT_EQ(api().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dev), 0x5C, kTask, stream_), CUDA_SUCCESS);
  Future fut = f.write_async(dev, kTask, kTask, stream_);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kTask);
  std::vector<std::uint8_t> back(kTask);
  auto got = f.pread(back.data(), kTask, kTask).get();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(back, std::vector<std::uint8_t>(kTask, 0x5C)) << "the write ran before the memset";
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrder, FailedRequestReleasesTheStreamAndReportsInItsFuture) {
  File f = open("w");  // reading a file opened for writing fails, once the stream gets there
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);  // returns: the stream was released
  EXPECT_EQ(after, std::vector<std::uint8_t>(kSize + 1, 0x11)) << "later work sees what the buffer held";
  auto r = fut.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(r.status().message(), HasSubstr("opened for writing only"));
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrder, CancelledBeforeTheStreamGetsThereNeverBegins) {
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  fut.cancel();
  EXPECT_TRUE(fut.done()) << "a request its stream has not reached ends when cancelled";
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);  // the stream is released all the same
  auto r = fut.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::cancelled);
  EXPECT_EQ(after, std::vector<std::uint8_t>(kSize + 1, 0x11)) << "a cancelled request read anyway";
  EXPECT_EQ(f.report().total_ops(), 0u);
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrder, FallsBackToAHostFunctionWithoutStreamMemoryOperations) {
  testing::fake_cuda_script().fail("cuStreamWaitValue32_v2", CUDA_ERROR_NOT_SUPPORTED);
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), after.begin()));
  EXPECT_EQ(testing::fake_cuda_counters().host_functions_queued, 2u);  // begin, then the blocking wait
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrder, ManyRequestsOnOneStreamRunInItsOrder) {
  // Each request reads one task of the file into the same device range; the copy after each one must
  // see that request's bytes, so the requests must run one after another in the stream's order.
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kTask);
  constexpr int kRequests = 5;
  std::vector<std::vector<std::uint8_t>> copies(kRequests, std::vector<std::uint8_t>(kTask));
  std::vector<Future> futures;
  for (int i = 0; i < kRequests; ++i) {
    futures.push_back(f.read_async(dev, kTask, static_cast<std::uint64_t>(i) * kTask, stream_));
    ASSERT_EQ(api().cuMemcpyDtoHAsync_v2(copies[i].data(), reinterpret_cast<CUdeviceptr>(dev), kTask, stream_),
              CUDA_SUCCESS);
  }
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  for (int i = 0; i < kRequests; ++i) {
    auto r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(std::memcmp(copies[i].data(), expected_.data() + i * kTask, kTask), 0) << "request " << i;
  }
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrder, TheDefaultStreamNeedsACurrentContext) {
  File f = open("r");
  ASSERT_EQ(api().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  std::vector<std::uint8_t> host(16);
  auto r = f.read_async(host.data(), host.size(), 0, nullptr).get();
  ASSERT_TRUE(detail::make_current(api(), 0).ok());  // for TearDown's stream
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  EXPECT_THAT(r.status().message(), HasSubstr("stream 0 is a default stream"));
}

TEST_F(StreamOrder, TheLegacyDefaultStreamWorksWithAContext) {
  File f = open("r");
  std::vector<std::uint8_t> host(kSize, 0);
  Future fut = f.read_async(host.data(), kSize, 0, nullptr);
  ASSERT_EQ(api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(host, expected_);
}

TEST_F(StreamOrder, WithoutCudaTheFutureSaysWhy) {
  static const detail::GpuPlatform no_cuda{
      [](Status* why) -> const detail::CudaApi* {
        *why = Status(ErrorCode::unavailable, "libcuda.so.1 not found (test)");
        return nullptr;
      },
      nullptr, nullptr};
  Config c;
  detail::OpenOptions o;
  o.gpu = &no_cuda;
  auto f = detail::open_file(path_, "r", c, o);
  ASSERT_TRUE(f.ok());
  std::vector<std::uint8_t> host(16);
  auto r = f->read_async(host.data(), host.size(), 0, nullptr).get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::unavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("libcuda.so.1 not found"));
  EXPECT_THAT(r.status().message(), HasSubstr("stream-ordered read"));
}

}  // namespace
}  // namespace ferry
