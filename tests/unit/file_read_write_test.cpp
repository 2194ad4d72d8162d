// File::pread/pwrite through the host route: every size class at aligned and unaligned offsets, each
// O_DIRECT policy, page-aligned and unaligned buffers, reads past EOF, and the report of each request.
#include <fcntl.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "base/host_memory.hpp"
#include "engine/task_split.hpp"
#include "ferry/ferry.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

using ::testing::HasSubstr;

namespace ferry {
namespace {

constexpr std::uint64_t kTask = 64 * 1024;
constexpr std::uint8_t kSentinel = 0xA5;
constexpr std::uint64_t kGuard = 8192;  // sentinel bytes after the requested region

Config small_config(DirectIo policy) {
  Config c;
  c.set_task_size(kTask).set_threads(4).set_direct_io(policy);
  return c;
}

// A host buffer of `size` bytes plus a guard, page-aligned or deliberately misaligned by one byte, filled
// with the sentinel.
class HostBuffer {
 public:
  HostBuffer(std::uint64_t size, bool page_aligned)
      : size_(size), mem_(detail::HostMemory::allocate(size + kGuard + 1).value()) {
    data_ = mem_.data() + (page_aligned ? 0 : 1);
    std::memset(data_, kSentinel, size + kGuard);
  }
  std::uint8_t* data() { return data_; }
  // Checks `[0, got)` against the pattern at `file_offset` and `[got, size + guard)` against the sentinel.
  ::testing::AssertionResult holds(std::uint64_t file_offset, std::uint64_t got) const {
    for (std::uint64_t i = 0; i < got; ++i) {
      if (data_[i] != testing::pattern_byte(file_offset + i)) {
        return ::testing::AssertionFailure() << "byte " << i << " (file offset " << file_offset + i << ") is "
                                             << int(data_[i]) << ", expected "
                                             << int(testing::pattern_byte(file_offset + i));
      }
    }
    for (std::uint64_t i = got; i < size_ + kGuard; ++i) {
      if (data_[i] != kSentinel) {
        return ::testing::AssertionFailure() << "byte " << i << " past the " << got
                                             << " bytes read was written (" << int(data_[i]) << ")";
      }
    }
    return ::testing::AssertionSuccess();
  }

 private:
  std::uint64_t size_;
  detail::HostMemory mem_;
  std::uint8_t* data_;
};

std::uint64_t align_down_page(std::uint64_t v) { return v / 4096 * 4096; }

std::uint64_t expected_tasks(std::uint64_t offset, std::uint64_t size, std::uint64_t task_size) {
  return detail::split_request(offset, size, task_size, 4096).size();
}

std::string trace(DirectIo policy, bool page_aligned, std::uint64_t offset, std::uint64_t size) {
  return std::string("direct_io=") + direct_io_name(policy) + (page_aligned ? " page-aligned" : " misaligned") +
         " buffer, offset " + std::to_string(offset) + ", size " + std::to_string(size);
}

const std::uint64_t kSizes[] = {0, 1, 4095, 4096, 4097, kTask - 1, kTask, kTask + 1, 7 * kTask + 4097};
const std::uint64_t kOffsets[] = {0, 1, 4095, 4096, 4097, kTask - 1, kTask, kTask + 1, 3 * kTask + 100};

TEST(FileRead, EverySizeAndOffsetMatchesThePatternForEachPolicyAndBuffer) {
  auto dir = testing::test_dir();
  const std::uint64_t file_size = 12 * kTask + 333;  // larger than every offset + size
  auto path = testing::write_pattern_file(dir / "data.bin", file_size);
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    auto file = File::open(path, "r", small_config(policy));
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    for (bool page_aligned : {true, false}) {
      for (std::uint64_t offset : kOffsets) {
        for (std::uint64_t size : kSizes) {
          SCOPED_TRACE(trace(policy, page_aligned, offset, size));
          HostBuffer buf(size, page_aligned);
          auto r = file->pread(buf.data(), size, offset).get();
          ASSERT_TRUE(r.ok()) << r.status().to_string();
          EXPECT_EQ(r->bytes, size);
          EXPECT_TRUE(buf.holds(offset, size));
          EXPECT_EQ(r->report.total_ops(), expected_tasks(offset, size, kTask));
          EXPECT_EQ(r->report.at(Route::host).ops, r->report.total_ops());
          EXPECT_EQ(r->report.total_bytes(), size);
          if (policy == DirectIo::off) {
            EXPECT_EQ(r->report.io.direct_ops, 0u);
          }
          if (policy == DirectIo::on && file->direct_io_available() && offset % 4096 == 0 && size >= 4096) {
            // Memory O_DIRECT cannot reach (one byte off a page) reads through an aligned bounce buffer.
            EXPECT_GE(r->report.io.direct_ops, 1u) << "direct_io=on with an aligned body must use O_DIRECT";
            const bool bounced = std::any_of(r->report.notes.begin(), r->report.notes.end(),
                                             [](const std::string& n) { return n.find("bounce buffer") != n.npos; });
            EXPECT_EQ(bounced, !page_aligned) << "only memory O_DIRECT cannot reach goes through a bounce buffer";
          }
          if (policy == DirectIo::automatic) {
            // The file was just written, so its pages are cached: auto never sends hot data to O_DIRECT.
            EXPECT_EQ(r->report.io.direct_ops, 0u) << "auto read cached data with O_DIRECT";
            if (page_aligned && offset % 4096 == 0 && size >= 2 * kTask && file->direct_io_available()) {
              EXPECT_GE(r->report.io.cached_ops, 1u) << "aligned tasks were checked and found cached";
            }
          }
        }
      }
    }
  }
}

TEST(FileRead, DefaultFourMiBTasksOverAModestFile) {
  auto dir = testing::test_dir();
  const std::uint64_t file_size = 9 * (4u << 20) + 123;
  auto path = testing::write_pattern_file(dir / "data.bin", file_size);
  Config c;  // default task size
  ASSERT_EQ(c.task_size(), 4u << 20);
  auto file = File::open(path, "r", c);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  HostBuffer buf(file_size - 1, true);
  auto r = file->pread(buf.data(), file_size - 1, 1).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, file_size - 1);
  EXPECT_TRUE(buf.holds(1, file_size - 1));
  EXPECT_EQ(r->report.total_ops(), expected_tasks(1, file_size - 1, 4u << 20));
  EXPECT_EQ(r->report.total_ops(), 11u);  // head [1, 4096), nine body tasks (the last a page short), a 123-byte tail
}

TEST(FileRead, PastEndOfFileReturnsFewerBytesAndWritesNothingBeyond) {
  auto dir = testing::test_dir();
  const std::uint64_t file_size = 3 * kTask + 1000;
  auto path = testing::write_pattern_file(dir / "short.bin", file_size);
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    auto file = File::open(path, "r", small_config(policy));
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    struct Case {
      std::uint64_t offset, size;
    };
    for (Case c : {Case{0, 5 * kTask}, Case{kTask + 5, 5 * kTask}, Case{4096, file_size}, Case{0, file_size + 1},
                   Case{file_size - 1, 4096}, Case{file_size, 4096}, Case{file_size + 100, 2 * kTask},
                   Case{align_down_page(file_size), 2 * kTask}}) {
      for (bool page_aligned : {true, false}) {
        SCOPED_TRACE(trace(policy, page_aligned, c.offset, c.size));
        HostBuffer buf(c.size, page_aligned);
        auto r = file->pread(buf.data(), c.size, c.offset).get();
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        std::uint64_t expect = c.offset >= file_size ? 0 : std::min(c.size, file_size - c.offset);
        EXPECT_EQ(r->bytes, expect);
        EXPECT_TRUE(buf.holds(c.offset, expect));
      }
    }
  }
}

TEST(FileWrite, EverySizeAndOffsetLandsExactlyForEachPolicyAndBuffer) {
  auto dir = testing::test_dir();
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    for (bool page_aligned : {true, false}) {
      auto path = (dir / (std::string("out-") + direct_io_name(policy) + (page_aligned ? "-a" : "-u"))).string();
      auto file = File::open(path, "w", small_config(policy));
      ASSERT_TRUE(file.ok()) << file.status().to_string();
      int raw = ::open(path.c_str(), O_RDWR);
      ASSERT_GE(raw, 0);
      std::uint64_t direct_seen = 0;
      for (std::uint64_t offset : kOffsets) {
        for (std::uint64_t size : kSizes) {
          SCOPED_TRACE(trace(policy, page_aligned, offset, size));
          // Surround the target with a known byte, so that a write landing one byte off shows.
          std::uint64_t lo = offset >= 16 ? offset - 16 : 0, hi = offset + size + 16;
          std::vector<std::uint8_t> fill(hi - lo, 0xEE);
          ASSERT_EQ(::pwrite(raw, fill.data(), fill.size(), static_cast<off_t>(lo)), static_cast<ssize_t>(fill.size()));
          HostBuffer src(size, page_aligned);
          auto data = testing::pattern(offset, size);
          if (size) std::memcpy(src.data(), data.data(), size);
          auto r = file->pwrite(src.data(), size, offset).get();
          ASSERT_TRUE(r.ok()) << r.status().to_string();
          EXPECT_EQ(r->bytes, size);
          EXPECT_EQ(r->report.total_ops(), expected_tasks(offset, size, kTask));
          EXPECT_EQ(r->report.at(Route::host).ops, r->report.total_ops());
          direct_seen += r->report.io.direct_ops;
          if (policy != DirectIo::on || (!page_aligned && offset % 4096 == 0)) {
            EXPECT_EQ(r->report.io.direct_ops, 0u) << "writes use O_DIRECT only when asked and aligned";
          }
          std::vector<std::uint8_t> back(hi - lo);
          ASSERT_EQ(::pread(raw, back.data(), back.size(), static_cast<off_t>(lo)), static_cast<ssize_t>(back.size()));
          for (std::uint64_t at = lo; at < hi; ++at) {
            std::uint8_t want = (at >= offset && at < offset + size) ? testing::pattern_byte(at) : 0xEE;
            ASSERT_EQ(back[at - lo], want) << "file offset " << at;
          }
        }
      }
      if (policy == DirectIo::on && page_aligned && file->direct_io_available()) {
        EXPECT_GT(direct_seen, 0u) << "direct_io=on never wrote with O_DIRECT";
      }
      ::close(raw);
    }
  }
}

TEST(FileRead, ZeroBytesWithNullBufferSucceeds) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "data.bin", 100);
  auto file = File::open(path, "r", small_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  auto r = file->pread(nullptr, 0, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, 0u);
  EXPECT_EQ(r->report.total_ops(), 0u);
}

TEST(FileRead, NullBufferWithBytesIsInvalidArgumentNamingThePath) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "data.bin", 100);
  auto file = File::open(path, "r", small_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  auto r = file->pread(nullptr, 10, 0).get();
  ASSERT_THAT(r, StatusIs(ErrorCode::invalid_argument));
  EXPECT_THAT(r.status().message(), HasSubstr(path));
}

TEST(FileRead, ManyThreadsConfigStillCoversEveryByte) {
  auto dir = testing::test_dir();
  const std::uint64_t size = 40 * kTask + 17;
  auto path = testing::write_pattern_file(dir / "data.bin", size);
  Config c = small_config(DirectIo::automatic);
  c.set_threads(16);
  auto file = File::open(path, "r", c);
  ASSERT_TRUE(file.ok());
  HostBuffer buf(size, true);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, size);
  EXPECT_TRUE(buf.holds(0, size));
}

}  // namespace
}  // namespace ferry
