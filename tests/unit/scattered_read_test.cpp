// Scattered reads (FileState::submit_scattered, issue 47): one range of the file into several buffers, as the
// safetensors loader reads a run of tensors into their aligned places. The range is read in the tasks of a
// plain read; each task's bytes go to the buffers it covers: from the staged route's bounce buffers (one
// batched copy a piece where the driver has it), on the host route part by part where the page cache serves
// them or through one O_DIRECT read into an aligned bounce buffer where it does not, and through cuFile a
// buffer at a time. Also plain reads into host memory O_DIRECT cannot reach (NumPy's allocations, 16 bytes
// past a page), which take the same bounce buffer when cold (issue 48). Every byte is checked, and the poison
// around and between the buffers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "backends/staging_pool.hpp"
#include "base/host_memory.hpp"
#include "ferry/ferry.hpp"
#include "file/file_state.hpp"
#include "file/open_options.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ::testing::HasSubstr;

namespace ferry {
namespace {

using detail::Segment;
using testing::Op;
using testing::Rule;
using testing::StatusIs;

constexpr std::uint64_t kTask = 64 * 1024;
constexpr std::uint64_t kFile = 24 * kTask + 777;
constexpr std::uint8_t kPoison = 0xA5;

// Buffers of the given lengths, each at an `alignment`-aligned address of `memory` with poison between
// (as the loader places tensors): segments in request order.
std::vector<Segment> place(std::uint8_t* memory, const std::vector<std::uint64_t>& lengths, std::uint64_t alignment) {
  std::vector<Segment> out;
  std::uint64_t request = 0, at = alignment;  // poison before the first one too
  for (std::uint64_t n : lengths) {
    at = (at + alignment - 1) / alignment * alignment;
    out.push_back(Segment{request, n, reinterpret_cast<std::uintptr_t>(memory + at)});
    request += n;
    at += n + 1;  // at least one poison byte after each
  }
  return out;
}

std::uint64_t span_of(const std::vector<Segment>& segments, const std::uint8_t* memory) {
  const Segment& last = segments.back();
  return last.address + last.length - reinterpret_cast<std::uintptr_t>(memory) + 4096;
}

// Lengths that put buffer boundaries everywhere: inside tasks, across several tasks, a byte long.
std::vector<std::uint64_t> awkward_lengths(std::uint64_t total) {
  std::mt19937_64 rng(47);
  std::vector<std::uint64_t> lengths;
  std::uint64_t sum = 0;
  const std::uint64_t shapes[] = {1, 7, 4096, 3 * kTask + 5, 100, kTask, 12345};
  for (std::size_t i = 0; sum < total; ++i) {
    std::uint64_t n = std::min(total - sum, shapes[i % 7] + rng() % 3);
    lengths.push_back(n);
    sum += n;
  }
  return lengths;
}

// Each buffer holds the file's bytes of its part of the request and every other byte of `memory` is poison.
::testing::AssertionResult lands(const std::vector<Segment>& segments, std::uint64_t file_offset,
                                 const std::uint8_t* memory, std::uint64_t memory_bytes) {
  std::vector<bool> covered(memory_bytes, false);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const auto* at = reinterpret_cast<const std::uint8_t*>(segments[i].address);
    for (std::uint64_t k = 0; k < segments[i].length; ++k) {
      if (at[k] != testing::pattern_byte(file_offset + segments[i].offset + k)) {
        return ::testing::AssertionFailure() << "buffer " << i << " byte " << k << " is wrong";
      }
      covered[static_cast<std::size_t>(at - memory) + k] = true;
    }
  }
  for (std::uint64_t k = 0; k < memory_bytes; ++k) {
    if (!covered[k] && memory[k] != kPoison) {
      return ::testing::AssertionFailure() << "byte " << k << ", outside every buffer, changed";
    }
  }
  return ::testing::AssertionSuccess();
}

bool has_note(const Report& r, const std::string& part) {
  return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.find(part) != n.npos; });
}

class ScatteredRead : public ::testing::Test {
 protected:
  void SetUp() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    path_ = testing::write_pattern_file(testing::test_dir() / "data.bin", kFile);
  }
  void TearDown() override {
    detail::process_staging_pool().clear();
    (void)testing::fake_cuda_api().cuCtxSetCurrent(nullptr);
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }

  File open(DirectIo direct, CompatMode compat = CompatMode::on,
            const detail::GpuPlatform& gpu = testing::fake_gpu_platform()) {
    Config c;
    c.set_compat_mode(compat).set_direct_io(direct).set_task_size(kTask).set_bounce_buffer_size(kTask).set_threads(3);
    detail::OpenOptions o;
    o.gpu = &gpu;
    o.syscalls = &sys_;
    auto f = detail::open_file(path_, "r", c, o);
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    return std::move(*f);
  }

  static Result<Transfer> read(File& f, std::vector<Segment> segments, std::uint64_t offset) {
    return detail::FileState::of(f).submit_scattered(std::move(segments), offset).get();
  }

  std::string path_;
  testing::ScriptedSyscalls sys_;
};

TEST_F(ScatteredRead, IntoHostMemoryFromThePageCacheEachPartLandsInPlace) {
  // Cached by script, not by trust: a file just written may already be written back and evicted under load
  // (one ThreadSanitizer run in CI found a task not cached, and read it with O_DIRECT).
  sys_.add(Rule::on(Op::cached_pages).reports_cached(true));
  File f = open(DirectIo::automatic);
  for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{8}, std::uint64_t{4097}}) {
    const std::uint64_t size = kFile - offset - 500;
    auto memory = detail::HostMemory::allocate(2 * size + (1 << 20)).value();
    auto segments = place(memory.data(), awkward_lengths(size), 64);
    const std::uint64_t bytes = span_of(segments, memory.data());
    std::memset(memory.data(), kPoison, bytes);
    auto r = read(f, segments, offset);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->bytes, size);
    EXPECT_TRUE(lands(segments, offset, memory.data(), bytes)) << "offset " << offset;
    EXPECT_EQ(r->report.at(Route::host).ops, r->report.total_ops());
    EXPECT_EQ(r->report.io.direct_ops, 0u) << "every page reported cached";
  }
}

// Cold data: each aligned task is one O_DIRECT read into an aligned bounce buffer, copied to its parts.
TEST_F(ScatteredRead, ColdHostTasksAreOneODirectReadEachThroughABounceBuffer) {
  sys_.add(Rule::on(Op::cached_pages).reports_cached(false));
  File f = open(DirectIo::automatic);
  ASSERT_TRUE(f.direct_io_available()) << f.direct_io_note();
  const std::uint64_t size = 20 * kTask;  // aligned: every task can use O_DIRECT
  auto memory = detail::HostMemory::allocate(2 * size + (1 << 20)).value();
  auto segments = place(memory.data(), awkward_lengths(size), 64);
  const std::uint64_t bytes = span_of(segments, memory.data());
  std::memset(memory.data(), kPoison, bytes);
  auto r = read(f, segments, 0);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(lands(segments, 0, memory.data(), bytes));
  EXPECT_EQ(r->report.io.direct_ops, 20u);
  EXPECT_EQ(r->report.io.buffered_ops, 0u);
  int direct_reads = 0;
  for (const auto& call : sys_.calls(Op::pread)) direct_reads += call.direct ? 1 : 0;
  EXPECT_EQ(direct_reads, 20) << "one O_DIRECT read a task, not one a buffer";
  EXPECT_TRUE(has_note(r->report, "bounce buffer"));
}

// The NumPy case (issue 48): np.empty's memory is 16 bytes past a page, so O_DIRECT cannot land in it. A
// cold read still uses O_DIRECT, into a bounce buffer, and the report says so; nothing around it is touched.
TEST_F(ScatteredRead, AColdReadIntoMemoryODirectCannotReachStillUsesODirect) {
  sys_.add(Rule::on(Op::cached_pages).reports_cached(false));
  File f = open(DirectIo::automatic);
  ASSERT_TRUE(f.direct_io_available()) << f.direct_io_note();
  const std::uint64_t size = 9 * kTask + 100;  // its last task is not aligned: that one is read buffered
  auto memory = detail::HostMemory::allocate(size + 8192).value();
  std::memset(memory.data(), kPoison, size + 8192);
  std::uint8_t* dst = memory.data() + 16;
  auto r = f.pread(dst, size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<Segment> one{Segment{0, size, reinterpret_cast<std::uintptr_t>(dst)}};
  EXPECT_TRUE(lands(one, 0, memory.data(), size + 8192));
  EXPECT_EQ(r->report.io.direct_ops, 9u);
  EXPECT_EQ(r->report.io.buffered_ops, 1u);
  EXPECT_TRUE(has_note(r->report, "bounce buffer"));
}

TEST_F(ScatteredRead, AnODirectReadTheFileSystemRefusesFallsBackToBufferedReads) {
  sys_.add(Rule::on(Op::cached_pages).reports_cached(false));
  sys_.add(Rule::on(Op::pread).only_direct().fail(EINVAL));
  File f = open(DirectIo::automatic);
  ASSERT_TRUE(f.direct_io_available()) << f.direct_io_note();
  const std::uint64_t size = 6 * kTask;
  auto memory = detail::HostMemory::allocate(2 * size + (1 << 20)).value();
  auto segments = place(memory.data(), awkward_lengths(size), 64);
  const std::uint64_t bytes = span_of(segments, memory.data());
  std::memset(memory.data(), kPoison, bytes);
  auto r = read(f, segments, 0);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(lands(segments, 0, memory.data(), bytes));
  EXPECT_EQ(r->report.io.direct_ops, 0u);
  EXPECT_TRUE(has_note(r->report, "O_DIRECT read refused (EINVAL)"));
}

TEST_F(ScatteredRead, AnIoErrorNamesTheFileAndTheOffset) {
  sys_.add(Rule::on(Op::cached_pages).reports_cached(false));
  sys_.add(Rule::on_io().covering(3 * kTask + 10).fail(EIO));
  File f = open(DirectIo::automatic);
  auto memory = detail::HostMemory::allocate(16 * kTask).value();
  auto segments = place(memory.data(), awkward_lengths(6 * kTask), 64);
  auto r = read(f, segments, 0);
  EXPECT_THAT(r, StatusIs(ErrorCode::io_error, HasSubstr("at offset " + std::to_string(3 * kTask))));
  EXPECT_THAT(r.status().message(), HasSubstr(path_));
  EXPECT_EQ(r.status().sys_errno(), EIO);
}

// Device memory on the staged route: the file is read in whole pieces, and each piece's bytes move to the
// buffers it covers in one batched copy; with a driver that has none, in a copy each.
TEST_F(ScatteredRead, IntoDeviceMemoryEachPieceMovesToItsBuffersInOneBatchedCopy) {
  File f = open(DirectIo::automatic);
  for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{8}}) {
    const std::uint64_t size = 16 * kTask;
    auto lengths = awkward_lengths(size);
    auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(2 * size + (1 << 20)));
    auto segments = place(dev, lengths, 256);
    const std::uint64_t bytes = span_of(segments, dev);
    std::memset(dev, kPoison, bytes);
    const auto before = testing::fake_cuda_counters();
    auto r = read(f, segments, offset);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const auto after = testing::fake_cuda_counters();
    EXPECT_TRUE(lands(segments, offset, dev, bytes)) << "offset " << offset;
    EXPECT_EQ(r->report.at(Route::staged).bytes, size);
    EXPECT_EQ(after.htod_bytes - before.htod_bytes, size) << "each byte copied once";
    EXPECT_GT(after.batched_copy_calls - before.batched_copy_calls, 0u);
    EXPECT_LE(after.batched_copy_calls - before.batched_copy_calls + after.htod_async_copies - before.htod_async_copies,
              r->report.total_ops() + 1) << "more than one driver call a piece";
    testing::fake_cuda_free(dev);
  }
}

TEST_F(ScatteredRead, WithoutBatchedCopiesEachBufferOfAPieceGetsACopy) {
  const detail::GpuPlatform& older = testing::fake_gpu_platform_without_batched_copies();
  File f = open(DirectIo::automatic, CompatMode::on, older);
  const std::uint64_t size = 8 * kTask;
  auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(2 * size + (1 << 20)));
  auto segments = place(dev, awkward_lengths(size), 256);
  const std::uint64_t bytes = span_of(segments, dev);
  std::memset(dev, kPoison, bytes);
  const auto before = testing::fake_cuda_counters();
  auto r = read(f, segments, 0);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto after = testing::fake_cuda_counters();
  EXPECT_TRUE(lands(segments, 0, dev, bytes));
  EXPECT_EQ(after.batched_copy_calls - before.batched_copy_calls, 0u);
  EXPECT_GE(after.htod_async_copies - before.htod_async_copies, segments.size());
  testing::fake_cuda_free(dev);
}

// cuFile reads into one buffer at a time: each buffer is read on its own, and the report says so.
TEST_F(ScatteredRead, ThroughCufileEachBufferIsReadOnItsOwn) {
  File f = open(DirectIo::automatic, CompatMode::off);
  const std::uint64_t size = 6 * kTask;
  auto* dev = static_cast<std::uint8_t*>(testing::fake_cuda_alloc_device(2 * size + (1 << 20)));
  std::vector<std::uint64_t> lengths{kTask + 100, 4096, 2 * kTask, 7, size - (3 * kTask + 100 + 4096 + 7)};
  auto segments = place(dev, lengths, 4096);
  const std::uint64_t bytes = span_of(segments, dev);
  std::memset(dev, kPoison, bytes);
  auto r = read(f, segments, 4096);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(lands(segments, 4096, dev, bytes));
  EXPECT_EQ(r->report.at(Route::cufile_posix).bytes + r->report.at(Route::staged).bytes, size);
  EXPECT_GE(r->report.total_ops(), lengths.size()) << "a buffer at a time";
  EXPECT_TRUE(has_note(r->report, "each of the 5 buffers of this read was read on its own"));
  testing::fake_cuda_free(dev);
}

TEST_F(ScatteredRead, SegmentsThatDoNotFollowOneAnotherAreRefusedByIndex) {
  File f = open(DirectIo::automatic);
  std::vector<std::uint8_t> memory(4 * kTask);
  const auto at = [&](std::uint64_t k) { return reinterpret_cast<std::uintptr_t>(memory.data() + k); };
  auto gap = read(f, {Segment{0, 100, at(0)}, Segment{200, 100, at(512)}}, 0);
  EXPECT_THAT(gap, StatusIs(ErrorCode::invalid_argument, HasSubstr("buffer 1 starts at byte 200 of the request, "
                                                                   "not at byte 100")));
  auto empty = read(f, {Segment{0, 100, at(0)}, Segment{100, 0, at(512)}}, 0);
  EXPECT_THAT(empty, StatusIs(ErrorCode::invalid_argument, HasSubstr("buffer 1 is empty")));
  auto null = read(f, {Segment{0, 100, 0}}, 0);
  EXPECT_THAT(null, StatusIs(ErrorCode::invalid_argument, HasSubstr("buffer 0 is a null pointer")));
  void* dev = testing::fake_cuda_alloc_device(4096);
  auto mixed = read(f, {Segment{0, 4096, reinterpret_cast<std::uintptr_t>(dev)}, Segment{4096, 100, at(0)}}, 0);
  EXPECT_THAT(mixed, StatusIs(ErrorCode::invalid_argument, HasSubstr("buffer 1 is host-pageable memory")));
  testing::fake_cuda_free(dev);
}

// A read covers the file as it is: past its end nothing is written, in any buffer.
TEST_F(ScatteredRead, PastTheEndOfTheFileNothingIsWritten) {
  File f = open(DirectIo::automatic);
  const std::uint64_t offset = kFile - 5000;
  auto memory = detail::HostMemory::allocate(64 * 1024).value();
  auto segments = place(memory.data(), {3000, 1000, 4000, 500}, 64);
  const std::uint64_t bytes = span_of(segments, memory.data());
  std::memset(memory.data(), kPoison, bytes);
  auto r = read(f, segments, offset);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 5000u);
  std::vector<Segment> read_part{segments[0], segments[1], Segment{4000, 1000, segments[2].address}};
  EXPECT_TRUE(lands(read_part, offset, memory.data(), bytes));
}

}  // namespace
}  // namespace ferry
