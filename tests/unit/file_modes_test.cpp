// File modes ("r", "w", "r+", "a"), the position of read()/write() and their futures (tell, seek), size(), sync()
// and close().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ferry/ferry.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ::testing::AllOf;
using ::testing::HasSubstr;
using ferry::testing::StatusIs;

namespace ferry {
namespace {

constexpr std::uint64_t kTask = 64 * 1024;

Config small_config() {
  Config c;
  c.set_task_size(kTask).set_threads(4);
  return c;
}

std::vector<std::uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

std::string contents(const std::filesystem::path& p) {
  auto v = testing::read_whole_file(p);
  return {v.begin(), v.end()};
}

TEST(FileModes, ReadOnlyRefusesWritesWithAMessageNamingThePath) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "ro.bin", 4096);
  auto file = File::open(path, "r", small_config());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  char data[16] = {};
  auto w = file->pwrite(data, sizeof data, 0).get();
  ASSERT_THAT(w, StatusIs(ErrorCode::failed_precondition, AllOf(HasSubstr(path), HasSubstr("reading only"))));
  EXPECT_EQ(w.status().path(), path);
  auto w2 = file->write(data, sizeof data);
  ASSERT_THAT(w2, StatusIs(ferry::ErrorCode::failed_precondition));
  EXPECT_THAT(w2.status().to_string(), HasSubstr(path));
  EXPECT_EQ(testing::read_whole_file(path), testing::pattern(0, 4096)) << "nothing may have been written";
}

TEST(FileModes, WriteModeCreatesAMissingFile) {
  auto dir = testing::test_dir();
  auto path = (dir / "new.bin").string();
  auto file = File::open(path, "w", small_config());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(*file->size(), 0u);
}

TEST(FileModes, WriteModeTruncatesAnExistingFile) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "old.bin", 3 * kTask);
  auto file = File::open(path, "w", small_config());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(*file->size(), 0u);
  auto data = bytes_of("fresh");
  ASSERT_TRUE(file->write(data.data(), data.size()).ok());
  EXPECT_EQ(contents(path), "fresh");
}

TEST(FileModes, WriteModeRefusesReads) {
  auto dir = testing::test_dir();
  auto path = (dir / "w.bin").string();
  auto file = File::open(path, "w", small_config());
  ASSERT_TRUE(file.ok());
  char buf[8];
  auto r = file->pread(buf, sizeof buf, 0).get();
  EXPECT_THAT(r, StatusIs(ErrorCode::failed_precondition, AllOf(HasSubstr("writing only"), HasSubstr(path))));
}

TEST(FileModes, ReadWriteModeKeepsContentsAndAllowsBoth) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "rw.bin", 2 * kTask);
  auto file = File::open(path, "r+", small_config());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(*file->size(), 2 * kTask) << "r+ must not truncate";
  auto patch = bytes_of("PATCH");
  ASSERT_TRUE(file->pwrite(patch.data(), patch.size(), 1000).get().ok());
  std::vector<std::uint8_t> back(2 * kTask);
  auto r = file->pread(back.data(), back.size(), 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto want = testing::pattern(0, 2 * kTask);
  std::copy(patch.begin(), patch.end(), want.begin() + 1000);
  EXPECT_EQ(back, want);
}

TEST(FileModes, ReadWriteModeOnAMissingFileIsNotFound) {
  auto dir = testing::test_dir();
  auto path = (dir / "absent.bin").string();
  auto file = File::open(path, "r+", small_config());
  ASSERT_THAT(file, StatusIs(ErrorCode::not_found));
  EXPECT_THAT(file.status().to_string(), HasSubstr(path));
  EXPECT_FALSE(std::filesystem::exists(path)) << "r+ must not create";
}

TEST(FileModes, AppendModeWritesLandAtTheEndInSequence) {
  auto dir = testing::test_dir();
  auto path = (dir / "log.txt").string();
  {
    auto file = File::open(path, "a", small_config());
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    auto a = bytes_of("first;"), b = bytes_of("second;");
    auto ra = file->write(a.data(), a.size());
    ASSERT_TRUE(ra.ok()) << ra.status().to_string();
    EXPECT_EQ(ra->bytes, a.size());
    ASSERT_TRUE(file->write(b.data(), b.size()).ok());
  }
  EXPECT_EQ(contents(path), "first;second;");
  {
    auto file = File::open(path, "a", small_config());
    ASSERT_TRUE(file.ok());
    auto c = bytes_of("third;");
    ASSERT_TRUE(file->write(c.data(), c.size()).ok());
  }
  EXPECT_EQ(contents(path), "first;second;third;") << "a reopened file in mode a must append, not overwrite";
}

TEST(FileModes, AppendModeWriteLandsAfterDataAddedSinceOpen) {
  // Regression: write() in mode "a" used the size seen at open, so it overwrote bytes that a pwrite()
  // (or another writer) had added since.
  auto dir = testing::test_dir();
  auto path = (dir / "log.txt").string();
  auto file = File::open(path, "a", small_config());
  ASSERT_TRUE(file.ok());
  auto head = bytes_of("0123456789");
  ASSERT_TRUE(file->pwrite(head.data(), head.size(), 0).get().ok());
  auto tail = bytes_of("abc");
  ASSERT_TRUE(file->write(tail.data(), tail.size()).ok());
  EXPECT_EQ(contents(path), "0123456789abc");
  {
    auto other = File::open(path, "a", small_config());
    ASSERT_TRUE(other.ok());
    auto more = bytes_of("XYZ");
    ASSERT_TRUE(other->write(more.data(), more.size()).ok());
  }
  auto last = bytes_of("!");
  ASSERT_TRUE(file->write(last.data(), last.size()).ok());
  EXPECT_EQ(contents(path), "0123456789abcXYZ!");
}

TEST(FileModes, BlockingReadAdvancesThePositionAndStopsAtTheEnd) {
  auto dir = testing::test_dir();
  const std::uint64_t size = 2 * kTask + 100;
  auto path = testing::write_pattern_file(dir / "seq.bin", size);
  auto file = File::open(path, "r", small_config());
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(kTask + 7);
  std::uint64_t at = 0;
  for (int i = 0; i < 2; ++i) {
    auto r = file->read(buf.data(), buf.size());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->bytes, buf.size());
    EXPECT_EQ(buf, testing::pattern(at, buf.size())) << "read " << i;
    at += buf.size();
  }
  auto r = file->read(buf.data(), buf.size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, size - at) << "the last read stops at the end of the file";
  EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(r->bytes),
                         testing::pattern(at, size - at).begin()));
  auto at_end = file->read(buf.data(), buf.size());
  ASSERT_TRUE(at_end.ok());
  EXPECT_EQ(at_end->bytes, 0u);
}

TEST(FileModes, BlockingWriteAdvancesThePosition) {
  auto dir = testing::test_dir();
  auto path = (dir / "seq.bin").string();
  auto file = File::open(path, "w", small_config());
  ASSERT_TRUE(file.ok());
  auto all = testing::pattern(0, 3 * kTask + 5);
  std::uint64_t at = 0;
  for (std::uint64_t chunk : {std::uint64_t{1}, kTask - 1, kTask + 3, all.size() - 2 * kTask - 3}) {
    auto w = file->write(all.data() + at, chunk);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(w->bytes, chunk);
    at += chunk;
  }
  ASSERT_EQ(at, all.size());
  EXPECT_EQ(*file->size(), all.size());
  EXPECT_TRUE(file->sync().ok());
  EXPECT_EQ(testing::read_whole_file(path), all);
}

TEST(FileModes, PreadAndPwriteDoNotMoveThePosition) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "pos.bin", 10000);
  auto file = File::open(path, "r+", small_config());
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(100);
  ASSERT_TRUE(file->pread(buf.data(), buf.size(), 5000).get().ok());
  ASSERT_TRUE(file->pwrite(buf.data(), buf.size(), 5000).get().ok());
  auto r = file->read(buf.data(), buf.size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(buf, testing::pattern(0, 100));
}

TEST(FileModes, TellAndSeekMoveTheBlockingCallsPosition) {
  auto dir = testing::test_dir();
  const std::uint64_t size = 10000;
  auto path = testing::write_pattern_file(dir / "pos.bin", size);
  auto file = File::open(path, "r+", small_config());
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(100);
  EXPECT_EQ(file->tell(), 0u);
  ASSERT_TRUE(file->read(buf.data(), buf.size()).ok());
  EXPECT_EQ(file->tell(), 100u);
  file->seek(5000);
  EXPECT_EQ(file->tell(), 5000u);
  ASSERT_TRUE(file->read(buf.data(), buf.size()).ok());
  EXPECT_EQ(buf, testing::pattern(5000, 100));
  EXPECT_EQ(file->tell(), 5100u);
  file->seek(size - 30);
  auto r = file->read(buf.data(), buf.size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, 30u);
  EXPECT_EQ(file->tell(), size) << "a short read pulls the position back to where the data ended";
  file->seek(size + 50);  // past the end: a write there extends the file
  ASSERT_TRUE(file->write(buf.data(), 10).ok());
  EXPECT_EQ(file->tell(), size + 60);
  EXPECT_EQ(*file->size(), size + 60);
}

TEST(FileModes, ReadAtPositionReservesAtOnceAndSettlesWhenDone) {
  auto dir = testing::test_dir();
  const std::uint64_t size = 3 * kTask;
  auto path = testing::write_pattern_file(dir / "pos.bin", size);
  auto file = File::open(path, "r", small_config());
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> a(kTask + 5), b(kTask);
  Future first = file->read_at_position(a.data(), a.size());
  EXPECT_EQ(file->tell(), a.size()) << "the bytes are reserved when the request starts";
  Future second = file->read_at_position(b.data(), b.size());
  EXPECT_EQ(file->tell(), a.size() + b.size());
  auto rb = second.get();
  auto ra = first.get();
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(a, testing::pattern(0, a.size()));
  EXPECT_EQ(b, testing::pattern(a.size(), b.size()));
  // A short read: get() returns with the position back where the data ended.
  std::vector<std::uint8_t> rest(kTask);
  auto short_read = file->read_at_position(rest.data(), rest.size()).get();
  ASSERT_TRUE(short_read.ok());
  EXPECT_EQ(short_read->bytes, size - a.size() - b.size());
  EXPECT_EQ(file->tell(), size);
  // One whose outcome is never taken settles when it completes.
  file->seek(size - 10);
  Future untaken = file->read_at_position(rest.data(), rest.size());
  untaken.wait();
  for (int i = 0; i < 5000 && file->tell() != size; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(file->tell(), size);
  // A seek made while a request is in flight wins over its settling.
  file->seek(size - 10);
  Future moved = file->read_at_position(rest.data(), rest.size());
  file->seek(7);
  ASSERT_TRUE(moved.get().ok());
  EXPECT_EQ(file->tell(), 7u);
}

TEST(FileModes, AFailedRequestAtThePositionLeavesItWhereItBegan) {
  auto dir = testing::test_dir();
  auto path = (dir / "out.bin").string();
  auto file = File::open(path, "w", small_config());
  ASSERT_TRUE(file.ok());
  file->seek(40);
  std::vector<std::uint8_t> buf(100);
  EXPECT_THAT(file->read_at_position(buf.data(), buf.size()).get(), StatusIs(ErrorCode::failed_precondition))
      << "mode \"w\" is for writing only";
  EXPECT_EQ(file->tell(), 40u);
}

TEST(FileModes, WriteAtPositionInAppendModeLandsAtTheEndAndTellSaysWhere) {
  auto dir = testing::test_dir();
  auto path = (dir / "log.txt").string();
  auto file = File::open(path, "a", small_config());
  ASSERT_TRUE(file.ok());
  auto head = bytes_of("0123456789");
  ASSERT_TRUE(file->pwrite(head.data(), head.size(), 0).get().ok());
  file->seek(2);  // mode "a": a write still lands at the end of the file
  auto tail = bytes_of("abc");
  auto w = file->write_at_position(tail.data(), tail.size()).get();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(contents(path), "0123456789abc");
  EXPECT_EQ(file->tell(), 13u);
}

TEST(FileModes, SizeFollowsWritesAndSyncSucceeds) {
  auto dir = testing::test_dir();
  auto path = (dir / "grow.bin").string();
  auto file = File::open(path, "w", small_config());
  ASSERT_TRUE(file.ok());
  auto data = testing::pattern(0, 5000);
  ASSERT_TRUE(file->pwrite(data.data(), data.size(), kTask).get().ok());
  EXPECT_EQ(*file->size(), kTask + 5000);
  Status s = file->sync();
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(FileModes, UseAfterCloseFailsCleanlyNamingThePath) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "closed.bin", 8192);
  auto file = File::open(path, "r+", small_config());
  ASSERT_TRUE(file.ok());
  Status c = file->close();
  ASSERT_TRUE(c.ok()) << c.to_string();
  char buf[64];
  auto r = file->pread(buf, sizeof buf, 0).get();
  EXPECT_THAT(r, StatusIs(ErrorCode::failed_precondition, AllOf(HasSubstr("closed"), HasSubstr(path))));
  auto w = file->pwrite(buf, sizeof buf, 0).get();
  ASSERT_THAT(w, StatusIs(ferry::ErrorCode::failed_precondition));
  EXPECT_THAT(w.status().message(), HasSubstr("closed"));
  auto rr = file->read(buf, sizeof buf);
  ASSERT_THAT(rr, StatusIs(ferry::ErrorCode::failed_precondition));
  EXPECT_THAT(rr.status().message(), HasSubstr("closed"));
  auto size = file->size();
  ASSERT_THAT(size, StatusIs(ferry::ErrorCode::failed_precondition));
  EXPECT_THAT(size.status().to_string(), HasSubstr(path));
  Status sync = file->sync();
  ASSERT_THAT(sync, StatusIs(ferry::ErrorCode::failed_precondition));
  EXPECT_THAT(sync.to_string(), HasSubstr(path));
  EXPECT_TRUE(file->close().ok()) << "closing twice is harmless";
  EXPECT_EQ(file->path(), path);
}

TEST(FileModes, UnknownModeIsInvalidArgumentNamingPathAndMode) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "x.bin", 10);
  for (const char* mode : {"", "x", "rw", "r++", "wa"}) {
    auto file = File::open(path, mode, small_config());
    EXPECT_THAT(file, StatusIs(ErrorCode::invalid_argument,
                               AllOf(HasSubstr(path), HasSubstr(std::string("\"") + mode + "\""))))
        << mode;
  }
}

TEST(FileModes, BinaryLetterIsAccepted) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "x.bin", 10);
  EXPECT_TRUE(File::open(path, "rb", small_config()).ok());
  EXPECT_TRUE(File::open(path, "r+b", small_config()).ok());
  EXPECT_TRUE(File::open(path, "ab", small_config()).ok());
}

TEST(FileModes, MissingFileIsNotFoundWithErrno) {
  auto dir = testing::test_dir();
  auto path = (dir / "nope.bin").string();
  auto file = File::open(path, "r", small_config());
  ASSERT_THAT(file, StatusIs(ErrorCode::not_found));
  EXPECT_EQ(file.status().sys_errno(), ENOENT);
  EXPECT_EQ(file.status().path(), path);
  EXPECT_THAT(file.status().to_string(), HasSubstr(path));
  EXPECT_THAT(file.status().to_string(), HasSubstr("ENOENT"));
}

TEST(FileModes, DirectoryIsRefusedForReadingAndWriting) {
  auto dir = testing::test_dir();
  auto sub = dir / "subdir";
  std::filesystem::create_directories(sub);
  for (const char* mode : {"r", "r+", "w", "a"}) {
    auto file = File::open(sub.string(), mode, small_config());
    ASSERT_THAT(file, StatusIs(ErrorCode::is_a_directory)) << mode;
    EXPECT_THAT(file.status().to_string(), HasSubstr(sub.string()));
  }
}

TEST(FileModes, PathAndConfigAreKept) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "x.bin", 10);
  auto file = File::open(path, "r", small_config());
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->path(), path);
  EXPECT_EQ(file->config().task_size(), kTask);
}

TEST(FileModes, MovedFromFileLeavesTheMovedToUsable) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "x.bin", 100);
  auto opened = File::open(path, "r", small_config());
  ASSERT_TRUE(opened.ok());
  File file = std::move(*opened);
  std::vector<std::uint8_t> buf(100);
  auto r = file.pread(buf.data(), buf.size(), 0).get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(buf, testing::pattern(0, 100));
}

}  // namespace
}  // namespace ferry
