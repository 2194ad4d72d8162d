// Stream-ordered requests (File::read_async / write_async) on the fake CUDA driver.
//
// StreamOrdered: the fake's streams run queued work only when synchronised, so each test can look at the
// buffer and the future before the stream reaches the request, then synchronise and check that the work
// queued before it happened first and the work queued after it saw its bytes.
// HiddenDependencies: the fake runs like a GPU whose streams all share one hardware queue, and whose
// implicitly synchronising calls hold up every other thread's CUDA calls until the device is idle: the
// conditions under which the design of d7cbac4 hung on the H200 (docs/stream-order.md). The shapes of the
// PyTorch and CuPy reports of issue 20 run there, every one under a watchdog.
// The same orderings run on a real GPU in tests/gpu/stream_order_gpu_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "backends/staging_pool.hpp"
#include "ferry/config.hpp"
#include "engine/thread_pool.hpp"
#include "file/open_options.hpp"
#include "file/stream_order.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/busy_pool.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ::testing::HasSubstr;

namespace ferry {
namespace {

using detail::CUDA_ERROR_NOT_SUPPORTED;
using detail::CUDA_SUCCESS;
using detail::CUdeviceptr;
using detail::CUstream;
using testing::FakeCopyMode;
using testing::FakeDeviceMode;
using testing::StatusIs;

std::uint64_t mechanism_count(const Report& r, StreamOrder m) { return r.stream_order[static_cast<std::size_t>(m)]; }

constexpr std::uint64_t kTask = 64 * 1024;
constexpr std::uint64_t kSize = 5 * kTask + 123;

class StreamOrderBase : public ::testing::Test {
 protected:

  void set_up(FakeDeviceMode mode) {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    testing::fake_cuda_script().copy_mode = FakeCopyMode::deferred;  // nothing runs until the stream gets there
    testing::fake_cuda_script().device_mode = mode;
    dir_ = testing::test_dir();
    ASSERT_TRUE(detail::make_current(api(), 0).ok());
    ASSERT_EQ(api().cuStreamCreate(&stream_, 0), CUDA_SUCCESS);
    path_ = testing::write_pattern_file(dir_ / "data.bin", kSize);
    expected_ = testing::pattern(0, kSize);
  }
  void TearDown() override {
    EXPECT_EQ(api().cuStreamDestroy_v2(stream_), CUDA_SUCCESS);
    EXPECT_TRUE(pending_stream_requests().empty()) << "a request outlived its test";
    detail::process_staging_pool().clear();
    detail::release_stream_words_for_testing(api());
    EXPECT_EQ(testing::fake_cuda_pending_copies(), 0u) << "work still queued";
    (void)api().cuCtxSetCurrent(nullptr);
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }

  static const detail::CudaApi& api() { return testing::fake_cuda_api(); }

  // Makes the test's file `size` bytes of the pattern instead of kSize.
  void use_file_of(std::uint64_t size) {
    path_ = testing::write_pattern_file(dir_ / "data.bin", size);
    expected_ = testing::pattern(0, size);
  }

  File open(const char* mode, CompatMode compat = CompatMode::on, unsigned threads = 3, unsigned slots_per_kit = 2,
            std::uint64_t piece = kTask) {
    Config c;
    c.set_compat_mode(compat).set_task_size(piece).set_bounce_buffer_size(piece).set_threads(threads);
    c.set_bounce_buffers_per_thread(slots_per_kit);
    detail::OpenOptions o;
    o.gpu = &testing::fake_gpu_platform();
    auto f = detail::open_file(path_, mode, c, o);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }

  // Before: memset the device buffer to 0x11; the request; after: copy the device buffer to the host, then
  // memset it to 0 (later work that overwrites the buffer must not reach the copy). Returns the future.
  Future queue_read(File& f, void* dev, std::vector<std::uint8_t>* host_after, std::uint64_t size = kSize,
                    CUstream stream = nullptr) {
    if (stream == nullptr) stream = stream_;
    auto d = reinterpret_cast<CUdeviceptr>(dev);
    EXPECT_EQ(api().cuMemsetD8Async(d, 0x11, size + 1, stream), CUDA_SUCCESS);
    Future fut = f.read_async(dev, size, 0, stream);
    host_after->assign(size + 1, 0);
    EXPECT_EQ(api().cuMemcpyDtoHAsync_v2(host_after->data(), d, size + 1, stream), CUDA_SUCCESS);
    EXPECT_EQ(api().cuMemsetD8Async(d, 0, size + 1, stream), CUDA_SUCCESS);
    return fut;
  }

  // Reads the test's whole file of `size` bytes with queue_read and checks every byte and the byte past it.
  void read_and_check_every_byte(File& f, std::uint64_t size) {
    void* dev = testing::fake_cuda_alloc_device(size + 1);
    std::vector<std::uint8_t> after;
    Future fut = queue_read(f, dev, &after, size);
    ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
    auto r = fut.get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, size);
    EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), after.begin())) << "a copy was wrong or late";
    EXPECT_EQ(after[size], 0x11) << "the byte past the request is the memset's";
    testing::fake_cuda_free(dev);
  }

  std::filesystem::path dir_;
  std::string path_;
  std::vector<std::uint8_t> expected_;
  CUstream stream_ = nullptr;
};

class StreamOrdered : public StreamOrderBase {
 protected:
  void SetUp() override { set_up(FakeDeviceMode::on_synchronize); }
};

TEST_F(StreamOrdered, StagedReadBeginsAfterEarlierWorkAndLaterWorkSeesItsBytes) {
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::memset(dev, 0xA5, kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  // The calling thread did not wait, and the stream has not reached the request: nothing was read.
  EXPECT_FALSE(fut.done());
  EXPECT_EQ(fut.bytes_done(), 0u);
  EXPECT_EQ(static_cast<std::uint8_t*>(dev)[0], 0xA5) << "the memset queued before ran early";
  EXPECT_EQ(f.report().total_ops(), 0u) << "read before the stream reached the request";

  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), after.begin()))
      << "the copy queued after the request did not see its bytes (or the memset ran after the read)";
  EXPECT_EQ(after[kSize], 0x11) << "the byte past the request is the memset's";
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kSize);
  EXPECT_EQ(fut.bytes_done(), 0u);  // get() took the state
  EXPECT_EQ(r->report.at(Route::staged).ops, r->report.total_ops());
  EXPECT_EQ(r->report.total_ops(), 6u);
  EXPECT_EQ(mechanism_count(r->report, StreamOrder::stream_copies), 1u);
  EXPECT_EQ(mechanism_count(f.report(), StreamOrder::stream_copies), 1u);
  // Six pieces through three kits of two side-by-side slots: one copy per kit's pair.
  auto c = testing::fake_cuda_counters();
  EXPECT_EQ(c.htod_async_copies, 3u) << "pieces whose slots lie side by side move in one copy";
  EXPECT_EQ(c.stream_waits, 3u) << "one wait before each copy";
  EXPECT_EQ(c.stream_writes, 4u) << "the stream reached the request, then one after each copy";
  testing::fake_cuda_free(dev);
}

// 42 pieces through 16 slots: every slot is reused, in both directions, and the bytes around stay.
// A read at the end of the file moves nothing; it is still a stream-ordered request of the File's report (it
// was in its own only).
TEST_F(StreamOrdered, AReadAtTheEndOfTheFileIsCountedInTheFilesReport) {
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize);
  std::memset(dev, 0xA5, kSize);
  auto r = f.read_async(dev, kSize, kSize, stream_).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 0u);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_EQ(static_cast<std::uint8_t*>(dev)[0], 0xA5) << "a read past the end wrote";
  EXPECT_EQ(mechanism_count(r->report, StreamOrder::stream_copies), 1u);
  EXPECT_EQ(mechanism_count(f.report(), StreamOrder::stream_copies), 1u);
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, ALargeReadAndWriteReuseEverySlotAndKeepEveryByte) {
  const std::uint64_t size = 40 * kTask + 4097;
  use_file_of(size);
  {
    File f = open("r", CompatMode::on, 8);
    read_and_check_every_byte(f, size);
    // A kit's two slots are side by side: its two pieces move in one copy. The file's last 4097 bytes are
    // a page and a byte, neither a full slot, so each moves alone: 20 + 2 copies.
    EXPECT_EQ(testing::fake_cuda_counters().htod_async_copies, 22u);
  }
  File f = open("r+", CompatMode::on, 8);
  void* dev = testing::fake_cuda_alloc_device(size);
  auto d = reinterpret_cast<CUdeviceptr>(dev);
  ASSERT_EQ(api().cuMemsetD8Async(d, 0x6B, size, stream_), CUDA_SUCCESS);
  const std::uint64_t copies_before = testing::fake_cuda_counters().dtoh_async_copies;
  Future fut = f.write_async(dev, size, 0, stream_);
  ASSERT_EQ(api().cuMemsetD8Async(d, 0, size, stream_), CUDA_SUCCESS);  // must come after every copy out
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  ASSERT_THAT(fut.get().status(), StatusIs(ErrorCode::ok));
  EXPECT_EQ(testing::read_whole_file(path_), std::vector<std::uint8_t>(size, 0x6B));
  EXPECT_EQ(testing::fake_cuda_counters().dtoh_async_copies - copies_before, 22u) << "20 pairs, a page, a byte";
  testing::fake_cuda_free(dev);
}

// A kit of eight side-by-side 4 MiB slots: a copy takes at most 16 MiB of them, and the bytes stay right
// where a run ends inside the kit and where the slots wrap around to its start.
TEST_F(StreamOrdered, ACopyRunTakesAtMost16MiBOfSideBySideSlots) {
  constexpr std::uint64_t kPiece = 4u << 20;
  const std::uint64_t size = 16 * kPiece + 3;  // 17 pieces through the 8 slots of one kit
  use_file_of(size);
  File f = open("r", CompatMode::on, 4, 8, kPiece);
  read_and_check_every_byte(f, size);
  // Pieces 0-3, 4-7, 8-11 and 12-15 (slot 7's end is not slot 0's start), then the last 3 bytes alone.
  EXPECT_EQ(testing::fake_cuda_counters().htod_async_copies, 5u);
}

TEST_F(StreamOrdered, BytesDoneCountsTheStepsThatEnded) {
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  fut.wait();
  EXPECT_EQ(fut.bytes_done(), kSize);
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, CuFileRoutesSynchronizeTheStreamAndReadOnTheCallersThread) {
  File f = open("r", CompatMode::off);
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  EXPECT_TRUE(fut.done()) << "the synchronized mechanism returns once the request is over";
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), after.begin()));
  EXPECT_EQ(after[kSize], 0x11);
  EXPECT_GT(r->report.total_ops(), r->report.at(Route::staged).ops) << "expected cuFile routes";
  EXPECT_EQ(mechanism_count(r->report, StreamOrder::synchronized), 1u);
  EXPECT_THAT(::testing::PrintToString(r->report.notes), HasSubstr("the route is cuFile's"));
  EXPECT_EQ(testing::fake_cuda_counters().stream_waits, 0u) << "nothing of Ferry's may wait on the stream";
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, HostBufferReadFeedsALaterCopyOnTheStream) {
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
  EXPECT_EQ(mechanism_count(r->report, StreamOrder::stream_wait), 1u);
  EXPECT_EQ(std::memcmp(dev, expected_.data(), kSize), 0);
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, WriteBeginsAfterTheWorkThatProducesItsDataAndEndsBeforeLaterWork) {
  File f = open("r+");
  constexpr std::uint64_t kBytes = 3 * kTask + 17;
  void* dev = testing::fake_cuda_alloc_device(kBytes);
  std::memset(dev, 0, kBytes);
  auto d = reinterpret_cast<CUdeviceptr>(dev);
  // The "kernel" producing the data is a memset queued before the write; the one after it overwrites
  // the buffer, which must not reach the file.
  ASSERT_EQ(api().cuMemsetD8Async(d, 0x5C, kBytes, stream_), CUDA_SUCCESS);
  Future fut = f.write_async(dev, kBytes, kTask, stream_);
  ASSERT_EQ(api().cuMemsetD8Async(d, 0x77, kBytes, stream_), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kBytes);
  EXPECT_EQ(mechanism_count(r->report, StreamOrder::stream_copies), 1u);
  std::vector<std::uint8_t> back(kBytes);
  auto got = f.pread(back.data(), kBytes, kTask).get();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(back, std::vector<std::uint8_t>(kBytes, 0x5C)) << "the write ran before the memset, or after the next";
  auto whole = testing::read_whole_file(path_);
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.begin() + kTask, whole.begin())) << "bytes before it changed";
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, AWriteThenAReadOfTheSameBytesOnOneStreamSeeTheWrite) {
  File f = open("r+");
  void* src = testing::fake_cuda_alloc_device(kTask);
  void* dst = testing::fake_cuda_alloc_device(kTask + 1);
  ASSERT_EQ(api().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(src), 0x3D, kTask, stream_), CUDA_SUCCESS);
  Future w = f.write_async(src, kTask, 2 * kTask, stream_);
  std::vector<std::uint8_t> after;
  ASSERT_EQ(api().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst), 0x11, kTask + 1, stream_), CUDA_SUCCESS);
  Future r = f.read_async(dst, kTask, 2 * kTask, stream_);
  after.assign(kTask, 0);
  ASSERT_EQ(api().cuMemcpyDtoHAsync_v2(after.data(), reinterpret_cast<CUdeviceptr>(dst), kTask, stream_), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  ASSERT_TRUE(w.get().ok());
  ASSERT_TRUE(r.get().ok());
  EXPECT_EQ(after, std::vector<std::uint8_t>(kTask, 0x3D)) << "the read began before the write had ended";
  testing::fake_cuda_free(src);
  testing::fake_cuda_free(dst);
}

TEST_F(StreamOrdered, ARequestRefusedBeforeQueueingLeavesTheStreamAlone) {
  File f = open("w");  // reading a file opened for writing is refused at once
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  EXPECT_TRUE(fut.done());
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_EQ(after, std::vector<std::uint8_t>(kSize + 1, 0x11)) << "later work sees what the buffer held";
  EXPECT_THAT(fut.get().status(), StatusIs(ErrorCode::failed_precondition, HasSubstr("opened for writing only")));
  EXPECT_EQ(testing::fake_cuda_counters().stream_waits, 0u);
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, AFileThatShrankFailsTheReadAndReleasesTheStream) {
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  std::filesystem::resize_file(path_, 2 * kTask);  // before the stream gets there
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);  // returns: the stream was let through
  EXPECT_THAT(fut.get().status(), StatusIs(ErrorCode::io_error, HasSubstr("shrank during the read")));
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, CancelledBeforeTheStreamGetsThereReadsNothing) {
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  fut.cancel();
  // The copies are queued: the buffer is in use until the stream has passed them.
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);  // the stream is released all the same
  EXPECT_THAT(fut.get().status(), StatusIs(ErrorCode::cancelled));
  EXPECT_EQ(f.report().total_ops(), 0u) << "a cancelled request read anyway";
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, AFileClosedBeforeTheStreamGetsThereFailsTheRequestAndCloseDoesNotWait) {
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  ASSERT_TRUE(f.close().ok()) << "close() waited for a request its stream has not reached";
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_THAT(fut.get().status(), StatusIs(ErrorCode::failed_precondition, HasSubstr("was closed before the stream")));
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, SynchronizesWithoutStreamMemoryOperations) {
  testing::fake_cuda_script().fail("cuStreamWriteValue32_v2", CUDA_ERROR_NOT_SUPPORTED);
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), after.begin()));
  EXPECT_EQ(mechanism_count(r->report, StreamOrder::synchronized), 1u);
  EXPECT_THAT(::testing::PrintToString(r->report.notes), HasSubstr("refused a stream memory operation"));
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, AStreamBeingCapturedIsRefusedAtOnce) {
  testing::fake_cuda_script().capturing.insert(stream_);
  File f = open("r");
  void* dev = testing::fake_cuda_alloc_device(kSize);
  Future fut = f.read_async(dev, kSize, 0, stream_);
  EXPECT_TRUE(fut.done());
  EXPECT_THAT(fut.get().status(), StatusIs(ErrorCode::failed_precondition, HasSubstr("captured into a CUDA graph")));
  EXPECT_EQ(testing::fake_cuda_counters().stream_writes, 0u) << "something was queued";
  testing::fake_cuda_free(dev);
}

TEST_F(StreamOrdered, ManyRequestsOnOneStreamRunInItsOrder) {
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

TEST_F(StreamOrdered, TheDefaultStreamNeedsACurrentContext) {
  File f = open("r");
  ASSERT_EQ(api().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  std::vector<std::uint8_t> host(16);
  auto r = f.read_async(host.data(), host.size(), 0, nullptr).get();
  ASSERT_TRUE(detail::make_current(api(), 0).ok());  // for TearDown's stream
  EXPECT_THAT(r.status(), StatusIs(ErrorCode::invalid_argument, HasSubstr("stream 0 is a default stream")));
}

TEST_F(StreamOrdered, TheLegacyDefaultStreamWorksWithAContext) {
  File f = open("r");
  std::vector<std::uint8_t> host(kSize, 0);
  Future fut = f.read_async(host.data(), kSize, 0, nullptr);
  ASSERT_EQ(api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(host, expected_);
}

TEST_F(StreamOrdered, WithoutCudaTheFutureSaysWhy) {
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
  EXPECT_THAT(r.status(), StatusIs(ErrorCode::unavailable, HasSubstr("libcuda.so.1 not found")));
  EXPECT_THAT(r.status().message(), HasSubstr("stream-ordered read"));
}

// ---- A device that runs on its own, with one hardware queue and blocking implicit synchronisation ----

class HiddenDependencies : public StreamOrderBase,
                           public ::testing::WithParamInterface<std::tuple<CompatMode, std::uint64_t>> {
 protected:
  void SetUp() override {
    set_up(FakeDeviceMode::autonomous);
    testing::fake_cuda_script().hardware_queues = 1;  // every stream behind every other
    testing::fake_cuda_script().implicit_sync_blocks_driver = true;
  }
  CompatMode compat() const { return std::get<0>(GetParam()); }
  std::uint64_t size() const { return std::get<1>(GetParam()); }
};

// Issue 20, PyTorch: a stream of its own; a fill, the read, then a reduction and another fill queued
// behind it, an allocation on the calling thread (the reduction's result tensor: cuMemAlloc synchronises
// implicitly) while the stream waits, then a synchronise.
TEST_P(HiddenDependencies, WorkQueuedAfterTheReadAndAnAllocationWhileItWaits) {
  File f = open("r", compat());
  void* dev = testing::fake_cuda_alloc_device(size() + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after, size());
  CUdeviceptr scratch = 0;
  ASSERT_EQ(api().cuMemAlloc_v2(&scratch, 4096), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.begin() + size(), after.begin()));
  EXPECT_EQ(after[size()], 0x11);
  EXPECT_EQ(std::vector<std::uint8_t>(static_cast<std::uint8_t*>(dev), static_cast<std::uint8_t*>(dev) + size()),
            std::vector<std::uint8_t>(size(), 0))
      << "the fill queued after the read did not come after it";
  ASSERT_EQ(api().cuMemFree_v2(scratch), CUDA_SUCCESS);
  testing::fake_cuda_free(dev);
}

// Issue 20, CuPy: 16 non-blocking streams, each reading its sixteenth of the file into a slice of one
// buffer and copying the slice out behind the read; then each stream is synchronised in turn.
TEST_P(HiddenDependencies, SixteenStreamsEachReadingASliceAndCopyingItOut) {
  File f = open("r", compat());
  constexpr int kStreams = 16;
  const std::uint64_t slice = size() / kStreams;
  void* dev = testing::fake_cuda_alloc_device(size());
  std::vector<std::uint8_t> out(size(), 0);
  std::vector<CUstream> streams(kStreams);
  std::vector<Future> futures;
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_EQ(api().cuStreamCreate(&streams[i], detail::CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    const std::uint64_t at = i * slice, n = i + 1 == kStreams ? size() - at : slice;
    futures.push_back(f.read_async(static_cast<char*>(dev) + at, n, at, streams[i]));
    ASSERT_EQ(api().cuMemcpyDtoHAsync_v2(out.data() + at, reinterpret_cast<CUdeviceptr>(dev) + at, n, streams[i]),
              CUDA_SUCCESS);
  }
  for (CUstream s : streams) ASSERT_EQ(api().cuStreamSynchronize(s), CUDA_SUCCESS);
  for (auto& fut : futures) ASSERT_THAT(fut.get().status(), StatusIs(ErrorCode::ok));
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.begin() + size(), out.begin()));
  for (CUstream s : streams) ASSERT_EQ(api().cuStreamDestroy_v2(s), CUDA_SUCCESS);
  testing::fake_cuda_free(dev);
}

// Issue 50: the same within the smallest pinned budget, which the sixteen requests' slots (three kits of 2 MiB
// each) would overrun, while the GPU is busy with earlier work for 300 ms (a wait on a word another thread
// writes, in front of every request): the eleventh request waits on its caller's thread for all its kits at
// once, until those queued before it end. Every request ends, every byte is right, the wait is reported, and
// the pinned bytes never went past the budget.
class OneHardwareQueue : public StreamOrderBase {
 protected:
  void SetUp() override {
    set_up(FakeDeviceMode::autonomous);
    testing::fake_cuda_script().hardware_queues = 1;
    testing::fake_cuda_script().implicit_sync_blocks_driver = true;
  }
};

TEST_F(OneHardwareQueue, SixteenStreamsWithinTheSmallestPinnedBudget) {
  constexpr int kStreams = 16;
  const std::uint64_t slice = 6 * kTask;
  use_file_of(kStreams * slice);
  const Config before = default_config().value();
  Config budgeted = before;
  set_default_config(budgeted.set_pinned_budget(64 << 20));
  detail::reset_peak_pinned_bytes();
  const std::uint64_t waits_before = ferry::pinned_memory_use().waits;
  File f = open("r");  // the staged route (cuFile's synchronise the stream: no slots)
  // The kits and streams are made now: making one later would wait for the busy GPU
  // (implicit_sync_blocks_driver).
  ASSERT_TRUE(detail::process_staging_pool().reserve({&api(), 0, kTask}, 2, 64).ok());
  std::vector<CUstream> streams(kStreams);
  for (CUstream& s : streams) ASSERT_EQ(api().cuStreamCreate(&s, detail::CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  void* dev = testing::fake_cuda_alloc_device(kStreams * slice);
  ASSERT_THAT(f.read_async(dev, slice, 0, streams[0]).get().status(), StatusIs(ErrorCode::ok));  // the words exist
  void* word = nullptr;
  ASSERT_EQ(api().cuMemHostAlloc(&word, 4096, detail::kMemHostAllocDeviceMap), CUDA_SUCCESS);
  auto* flag = static_cast<std::atomic<std::uint32_t>*>(word);
  flag->store(0);
  std::thread earlier_work([flag] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    flag->store(1);
  });
  std::vector<std::uint8_t> out(kStreams * slice, 0);
  std::vector<Future> futures;
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_EQ(api().cuStreamWaitValue32_v2(streams[i], reinterpret_cast<CUdeviceptr>(word), 1, 0), CUDA_SUCCESS);
    futures.push_back(f.read_async(static_cast<char*>(dev) + i * slice, slice, i * slice, streams[i]));
    ASSERT_EQ(api().cuMemcpyDtoHAsync_v2(out.data() + i * slice, reinterpret_cast<CUdeviceptr>(dev) + i * slice, slice,
                                         streams[i]),
              CUDA_SUCCESS);
  }
  earlier_work.join();
  for (CUstream s : streams) ASSERT_EQ(api().cuStreamSynchronize(s), CUDA_SUCCESS);
  std::uint64_t waited_ns = 0;
  for (auto& fut : futures) {
    auto r = fut.get();
    ASSERT_THAT(r.status(), StatusIs(ErrorCode::ok));
    waited_ns += r->report.io.pinned_wait_ns;
  }
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), out.begin()));
  EXPECT_LE(ferry::pinned_memory_use().peak_bytes, 64u << 20);
  EXPECT_GT(ferry::pinned_memory_use().waits, waits_before) << "the budget never held a request back";
  EXPECT_GT(waited_ns, 0u) << "no report says it waited";
  for (CUstream s : streams) ASSERT_EQ(api().cuStreamDestroy_v2(s), CUDA_SUCCESS);
  ASSERT_EQ(api().cuMemFreeHost(word), CUDA_SUCCESS);
  testing::fake_cuda_free(dev);
  set_default_config(before);
}

// Many pieces behind one hardware queue, with an allocation (an implicit synchronisation) while the stream
// waits: every slot is reused many times.
TEST_P(HiddenDependencies, ManyPiecesBehindOneHardwareQueue) {
  const std::uint64_t size = 20 * kTask + std::get<1>(GetParam()) % kTask;  // aligned, or not
  use_file_of(size);
  File f = open("r", compat(), 8);
  void* dev = testing::fake_cuda_alloc_device(size + 1);
  std::vector<std::uint8_t> after;
  Future fut = queue_read(f, dev, &after, size);
  CUdeviceptr scratch = 0;
  ASSERT_EQ(api().cuMemAlloc_v2(&scratch, 4096), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  ASSERT_THAT(fut.get().status(), StatusIs(ErrorCode::ok));
  EXPECT_TRUE(std::equal(expected_.begin(), expected_.end(), after.begin()));
  EXPECT_EQ(after[size], 0x11);
  ASSERT_EQ(api().cuMemFree_v2(scratch), CUDA_SUCCESS);
  testing::fake_cuda_free(dev);
}

// A write between the kernel that makes its data and one that overwrites the buffer, with a context-wide
// synchronisation from another thread meanwhile.
TEST_P(HiddenDependencies, WriteBetweenProducerAndConsumerWithAContextSynchronisation) {
  File f = open("r+", compat());
  void* dev = testing::fake_cuda_alloc_device(size());
  auto d = reinterpret_cast<CUdeviceptr>(dev);
  ASSERT_EQ(api().cuMemsetD8Async(d, 0x6B, size(), stream_), CUDA_SUCCESS);
  Future fut = f.write_async(dev, size(), 0, stream_);
  ASSERT_EQ(api().cuMemsetD8Async(d, 0, size(), stream_), CUDA_SUCCESS);
  std::thread other([] {
    ASSERT_TRUE(detail::make_current(api(), 0).ok());
    EXPECT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
  });
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  other.join();
  ASSERT_THAT(fut.get().status(), StatusIs(ErrorCode::ok));
  auto whole = testing::read_whole_file(path_);
  EXPECT_EQ(std::vector<std::uint8_t>(whole.begin(), whole.begin() + size()), std::vector<std::uint8_t>(size(), 0x6B));
  testing::fake_cuda_free(dev);
}

// The fake's model holds: an ordinary staged read, whose copies go on a worker's own stream, cannot end
// while another stream sharing its hardware queue waits on a word nobody wrote (what made the old design's
// workers wait for the very stream that waited for them).
TEST_F(StreamOrdered, TheAutonomousFakeHoldsStreamsBehindAnUnmetWait) {
  detail::process_staging_pool().clear();
  testing::reset_fake_cuda();
  testing::fake_cuda_script().device_mode = FakeDeviceMode::autonomous;
  testing::fake_cuda_script().hardware_queues = 1;
  ASSERT_TRUE(detail::make_current(api(), 0).ok());
  ASSERT_EQ(api().cuStreamCreate(&stream_, 0), CUDA_SUCCESS);
  File f = open("r");
  void* word = nullptr;
  ASSERT_EQ(api().cuMemHostAlloc(&word, 4096, detail::kMemHostAllocDeviceMap), CUDA_SUCCESS);
  auto* flag = static_cast<std::atomic<std::uint32_t>*>(word);
  flag->store(0);
  ASSERT_EQ(api().cuStreamWaitValue32_v2(stream_, reinterpret_cast<CUdeviceptr>(word), 1, 0), CUDA_SUCCESS);
  void* dev = testing::fake_cuda_alloc_device(kSize);
  Future read = f.pread(dev, kSize, 0);
  EXPECT_FALSE(read.wait_for(std::chrono::milliseconds(200))) << "a copy ran past an unmet wait in its queue";
  flag->store(1);
  ASSERT_THAT(read.get().status(), StatusIs(ErrorCode::ok));
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(dev, expected_.data(), kSize), 0);
  testing::fake_cuda_free(dev);
  ASSERT_EQ(api().cuMemFreeHost(word), CUDA_SUCCESS);
}

// Found on the H200 by the stress: the caller's thread queues a long request's commands while another
// thread frees memory (torch.cuda.empty_cache: an implicit synchronisation holding the driver). The
// stream's first waits must be met while the caller's next driver call waits: the request is watched
// before anything is queued.
class QueueingWhileAnotherThreadSynchronises : public StreamOrderBase {
 protected:
  void SetUp() override {
    set_up(FakeDeviceMode::autonomous);
    testing::fake_cuda_script().hardware_queues = 1;
    testing::fake_cuda_script().implicit_sync_blocks_driver = true;
    path_ = testing::write_pattern_file(dir_ / "long.bin", 256 * kTask + 5);
    expected_ = testing::pattern(0, 256 * kTask + 5);
  }
};

TEST_F(QueueingWhileAnotherThreadSynchronises, EveryRequestEnds) {
  File f = open("r");
  const std::uint64_t size = 256 * kTask + 5;
  void* dev = testing::fake_cuda_alloc_device(size);
  std::atomic<bool> stop{false};
  std::thread freeing([&] {
    ASSERT_TRUE(detail::make_current(api(), 0).ok());
    while (!stop.load()) {
      CUdeviceptr p = 0;
      ASSERT_EQ(api().cuMemAlloc_v2(&p, 4096), CUDA_SUCCESS);
      ASSERT_EQ(api().cuMemFree_v2(p), CUDA_SUCCESS);
    }
  });
  std::vector<Future> futures;
  for (int i = 0; i < 20; ++i) futures.push_back(f.read_async(dev, size, 0, stream_));
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  stop.store(true);
  freeing.join();
  for (auto& fut : futures) ASSERT_THAT(fut.get().status(), StatusIs(ErrorCode::ok));
  EXPECT_EQ(std::memcmp(dev, expected_.data(), size), 0);
  testing::fake_cuda_free(dev);
}

INSTANTIATE_TEST_SUITE_P(CompatAndSize, HiddenDependencies,
                         ::testing::Combine(::testing::Values(CompatMode::on, CompatMode::off, CompatMode::automatic),
                                            ::testing::Values(kSize, 4 * kTask)));

// A stream's steps never run on the shared pool: with every thread of it busy (as when they all wait for
// copies queued behind the stream's own wait), a stream-ordered read still ends.
TEST_F(StreamOrdered, StepsDoNotNeedTheSharedPool) {
  File f = open("r");
  testing::BusyPool busy;
  std::vector<std::uint8_t> host(kSize, 0);
  Future fut = f.read_async(host.data(), kSize, 0, stream_);
  ASSERT_EQ(api().cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_EQ(host, expected_);
  busy.release();
  ASSERT_THAT(fut.get().status(), StatusIs(ErrorCode::ok));
}

}  // namespace
}  // namespace ferry
