// Stream-ordered requests (File::read_async / write_async) on the real driver, in the shapes that hung at
// d7cbac4 (issue 20): a request between a producer kernel and consumer kernels on its stream, with an
// allocation and a module load (both synchronise implicitly) on the calling thread while the stream
// waits; sixteen non-blocking streams each reading a slice and copying it on; a write between the kernel
// that makes its data and one that overwrites it. Every compat mode, aligned and unaligned sizes, each
// test under a watchdog that fails it with every thread's stack and the pending requests after 60 s.
// The consumers check what they see on the GPU: a kernel counts the bytes that differ from a reference
// copy uploaded beforehand. Skips with the driver's reason where no GPU is usable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "ferry/file.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/device_memory.hpp"
#include "support/gpu_kernels.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

namespace fd = ferry::detail;
using ::testing::HasSubstr;

namespace ferry {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

std::uint64_t mechanism_count(const Report& r, StreamOrder m) { return r.stream_order[static_cast<std::size_t>(m)]; }

// GPU 0's primary context current on this thread, a non-blocking stream, the kernels loaded, and a file
// of `size` pattern bytes with a reference copy of them in device memory.
class StreamOrderGpu : public ::testing::TestWithParam<std::tuple<CompatMode, std::uint64_t>> {
 protected:
  void SetUp() override {
    api_ = fd::process_cuda_api();
    if (api_ == nullptr) GTEST_SKIP() << "CUDA unusable here: " << fd::process_cuda_status().to_string();
    if (!api_->stream_ordering_status().ok()) GTEST_SKIP() << api_->stream_ordering_status().to_string();
    if (!kernels_.ok()) GTEST_SKIP() << kernels_.why();
    context_ = std::make_unique<fd::ScopedDeviceContext>(*api_, 0);
    ASSERT_TRUE(context_->status().ok()) << context_->status().to_string();
    ASSERT_EQ(kernels_.load(), fd::CUDA_SUCCESS);
    ASSERT_EQ(api_->cuStreamCreate(&stream_, fd::CU_STREAM_NON_BLOCKING), fd::CUDA_SUCCESS);
    path_ = testing::write_pattern_file(testing::test_dir() / "data.bin", size());
    reference_ = std::make_unique<testing::DeviceMemory>(*api_, size());
    reference_->from_host(testing::pattern(0, size()));
    counter_ = std::make_unique<testing::DeviceMemory>(*api_, 8 * 64, 0, 0);
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);
      EXPECT_EQ(api_->cuStreamDestroy_v2(stream_), fd::CUDA_SUCCESS);
      EXPECT_EQ(api_->cuCtxSynchronize(), fd::CUDA_SUCCESS) << "a sticky CUDA error after the test";
    }
    reference_.reset();
    counter_.reset();
    context_.reset();
  }
  CompatMode compat() const { return std::get<0>(GetParam()); }
  std::uint64_t size() const { return std::get<1>(GetParam()); }

  File open(const char* mode) {
    Config c;
    c.set_compat_mode(compat());
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
  // Mismatch counter `slot` (zeroed at set-up), read back after the stream is synchronised.
  fd::CUdeviceptr counter(int slot) const { return counter_->address() + 8 * slot; }
  std::uint64_t mismatches(int slot) const {
    std::uint64_t n = 0;
    EXPECT_EQ(api_->cuMemcpyDtoH_v2(&n, counter(slot), 8), fd::CUDA_SUCCESS);
    return n;
  }

  const fd::CudaApi* api_ = nullptr;
  testing::GpuKernels kernels_;
  std::unique_ptr<fd::ScopedDeviceContext> context_;
  fd::CUstream stream_ = nullptr;
  std::string path_;
  std::unique_ptr<testing::DeviceMemory> reference_, counter_;
  std::string why_;
};

// Issue 20's PyTorch report: fill_(0xEE), read_async, a reduction and fill_(0) behind it; meanwhile the
// calling thread allocates 2 GiB (as `buf.to(torch.int64)` does) and loads a module (lazy loading).
TEST_P(StreamOrderGpu, WorkQueuedAfterTheReadWithAnAllocationAndAModuleLoadMeanwhile) {
  File f = open("r");
  if (!route_usable(f)) GTEST_SKIP() << why_;
  testing::DeviceMemory buf(*api_, size() + 1);
  ASSERT_EQ(kernels_.fill(buf.address(), size() + 1, 0xEE, stream_), fd::CUDA_SUCCESS);
  Future fut = f.read_async(buf.get(), size(), 0, stream_);
  ASSERT_EQ(kernels_.count_mismatches(buf.address(), reference_->address(), size(), counter(0), stream_),
            fd::CUDA_SUCCESS);
  ASSERT_EQ(kernels_.fill(buf.address(), size(), 0, stream_), fd::CUDA_SUCCESS);
  fd::CUdeviceptr big = 0;
  ASSERT_EQ(api_->cuMemAlloc_v2(&big, 2ull << 30), fd::CUDA_SUCCESS);
  testing::GpuKernels fresh;  // a module load while the stream waits
  ASSERT_EQ(fresh.load(), fd::CUDA_SUCCESS);
  ASSERT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);
  ASSERT_EQ(api_->cuMemFree_v2(big), fd::CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, size());
  EXPECT_EQ(mismatches(0), 0u) << "the consumer kernel saw other bytes than the file's";
  auto host = buf.to_host();
  EXPECT_EQ(host[size()], 0xEE) << "the byte past the read changed";
  EXPECT_EQ(std::count(host.begin(), host.begin() + size(), 0), static_cast<std::ptrdiff_t>(size()))
      << "the fill queued after the read did not come after it";
  const StreamOrder expected = compat() == CompatMode::off ? StreamOrder::synchronized : StreamOrder::stream_copies;
  EXPECT_EQ(mechanism_count(r->report, expected), 1u) << r->report.table();
}

// Issue 20's CuPy report: 16 non-blocking streams, each reading its sixteenth into a slice of one buffer
// and copying the slice into a second buffer behind the read; then each stream synchronised in turn.
TEST_P(StreamOrderGpu, SixteenStreamsEachReadingASliceAndCopyingItOn) {
  File f = open("r");
  if (!route_usable(f)) GTEST_SKIP() << why_;
  constexpr int kStreams = 16;
  testing::DeviceMemory dst(*api_, size()), out(*api_, size(), 0, 0x11);
  std::vector<fd::CUstream> streams(kStreams);
  std::vector<Future> futures;
  const std::uint64_t slice = size() / kStreams;
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_EQ(api_->cuStreamCreate(&streams[i], fd::CU_STREAM_NON_BLOCKING), fd::CUDA_SUCCESS);
    const std::uint64_t at = i * slice, n = i + 1 == kStreams ? size() - at : slice;
    futures.push_back(f.read_async(static_cast<char*>(dst.get()) + at, n, at, streams[i]));
    ASSERT_EQ(kernels_.copy(out.address() + at, dst.address() + at, n, streams[i]), fd::CUDA_SUCCESS);
  }
  for (fd::CUstream s : streams) ASSERT_EQ(api_->cuStreamSynchronize(s), fd::CUDA_SUCCESS);
  for (auto& fut : futures) EXPECT_THAT(fut.get().status(), testing::StatusIs(ErrorCode::ok));
  ASSERT_EQ(kernels_.count_mismatches(out.address(), reference_->address(), size(), counter(1), stream_),
            fd::CUDA_SUCCESS);
  ASSERT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);
  EXPECT_EQ(mismatches(1), 0u);
  for (fd::CUstream s : streams) ASSERT_EQ(api_->cuStreamDestroy_v2(s), fd::CUDA_SUCCESS);
}

// A write between the kernel producing its data and one overwriting the buffer, with a context-wide
// synchronisation on another thread meanwhile; then a stream-ordered read of it on the same stream.
TEST_P(StreamOrderGpu, WriteBetweenProducerAndConsumerThenReadItBack) {
  File f = open("r+");
  if (!route_usable(f, Direction::write)) GTEST_SKIP() << why_;
  testing::DeviceMemory src(*api_, size()), back(*api_, size());
  ASSERT_EQ(kernels_.copy(src.address(), reference_->address(), size(), stream_), fd::CUDA_SUCCESS);
  ASSERT_EQ(kernels_.fill(src.address(), 1, 0x5A, stream_), fd::CUDA_SUCCESS);  // the producer's mark
  Future w = f.write_async(src.get(), size(), 0, stream_);
  ASSERT_EQ(kernels_.fill(src.address(), size(), 0, stream_), fd::CUDA_SUCCESS);
  std::thread other([this] {
    fd::ScopedDeviceContext context(*api_, 0);
    EXPECT_EQ(api_->cuCtxSynchronize(), fd::CUDA_SUCCESS);
  });
  Future r = f.read_async(back.get(), size(), 0, stream_);
  ASSERT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);
  other.join();
  ASSERT_THAT(w.get().status(), testing::StatusIs(ErrorCode::ok));
  ASSERT_THAT(r.get().status(), testing::StatusIs(ErrorCode::ok));
  auto expected = testing::pattern(0, size());
  expected[0] = 0x5A;
  EXPECT_EQ(testing::read_whole_file(path_), expected) << "the file is not what the producer made";
  EXPECT_EQ(back.to_host(), expected) << "the read on the same stream did not see the write";
}

TEST_P(StreamOrderGpu, AFailedReadReleasesTheStream) {
  File f = open("r");
  if (!route_usable(f)) GTEST_SKIP() << why_;
  testing::DeviceMemory buf(*api_, size());
  Future fut = f.read_async(buf.get(), size(), 0, stream_);
  std::filesystem::resize_file(path_, size() / 2);  // before or while the stream gets there
  ASSERT_EQ(api_->cuStreamSynchronize(stream_), fd::CUDA_SUCCESS);
  auto r = fut.get();
  if (r.ok()) {
    GTEST_SKIP() << "the read ended before the file shrank (the synchronized mechanism reads at once)";
  }
  EXPECT_THAT(r.status(), testing::StatusIs(ErrorCode::io_error, HasSubstr("shrank")));
}

TEST_P(StreamOrderGpu, CapturingTheRequestIntoAGraphFailsAtOnce) {
  File f = open("r");
  testing::DeviceMemory buf(*api_, size());
  ASSERT_EQ(kernels_.begin_capture(stream_), fd::CUDA_SUCCESS);
  Future fut = f.read_async(buf.get(), size(), 0, stream_);
  EXPECT_TRUE(fut.done());
  EXPECT_EQ(kernels_.end_capture(stream_), fd::CUDA_SUCCESS);
  EXPECT_THAT(fut.get().status(),
              testing::StatusIs(ErrorCode::failed_precondition, HasSubstr("captured into a CUDA graph")));
}

std::string name_of(const ::testing::TestParamInfo<std::tuple<CompatMode, std::uint64_t>>& info) {
  const char* compat = std::get<0>(info.param) == CompatMode::on    ? "CompatOn"
                       : std::get<0>(info.param) == CompatMode::off ? "CompatOff"
                                                                    : "CompatAuto";
  return std::string(compat) + (std::get<1>(info.param) % 4096 ? "Unaligned" : "Aligned");
}

INSTANTIATE_TEST_SUITE_P(CompatAndSize, StreamOrderGpu,
                         ::testing::Combine(::testing::Values(CompatMode::on, CompatMode::off, CompatMode::automatic),
                                            ::testing::Values(256 * kMiB, 256 * kMiB + 4097)),
                         name_of);

}  // namespace
}  // namespace ferry
