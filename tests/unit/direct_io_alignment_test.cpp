// O_DIRECT's alignment comes from statx through the syscall seam: what the file system reports is used (never
// below 4 KiB for offsets), and where it reports nothing or statx fails, the 4 KiB defaults stay.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

#include "source/file_descriptors.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/test_files.hpp"

namespace ferry::detail {
namespace {

using testing::Op;
using testing::Rule;
using testing::ScriptedSyscalls;

// The real calls, with statx's DIOALIGN answer replaced.
class ReportedAlignment final : public Syscalls {
 public:
  ReportedAlignment(std::uint64_t offset, std::uint64_t memory) : offset_(offset), memory_(memory) {}
  int open(const char* path, int flags, mode_t mode) override { return real_syscalls().open(path, flags, mode); }
  int close(int fd) override { return real_syscalls().close(fd); }
  ssize_t pread(int fd, void* buf, std::size_t count, off_t offset) override {
    return real_syscalls().pread(fd, buf, count, offset);
  }
  ssize_t pwrite(int fd, const void* buf, std::size_t count, off_t offset) override {
    return real_syscalls().pwrite(fd, buf, count, offset);
  }
  ssize_t pread_nowait(int fd, void* buf, std::size_t count, off_t offset) override {
    return real_syscalls().pread_nowait(fd, buf, count, offset);
  }
  int cached_pages(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t* cached,
                   std::uint64_t* total) override {
    return real_syscalls().cached_pages(fd, offset, length, cached, total);
  }
  int fstat(int fd, struct stat* st) override { return real_syscalls().fstat(fd, st); }
  off_t seek_end(int fd) override { return real_syscalls().seek_end(fd); }
  int clear_nonblocking(int fd) override { return real_syscalls().clear_nonblocking(fd); }
  int direct_io_alignment(int, std::uint64_t* offset_align, std::uint64_t* memory_align) override {
    ++asked;
    *offset_align = offset_;
    *memory_align = memory_;
    return 0;
  }
  int fdatasync(int fd) override { return real_syscalls().fdatasync(fd); }
  int ftruncate(int fd, off_t length) override { return real_syscalls().ftruncate(fd, length); }
  int asked = 0;

 private:
  std::uint64_t offset_, memory_;
};

class DirectIoAlignment : public ::testing::Test {
 protected:
  void SetUp() override { path_ = testing::write_pattern_file(testing::test_dir() / "f.bin", 1 << 16); }
  Result<FileDescriptors> open(Syscalls& sys) {
    return FileDescriptors::open(sys, path_, OpenFlags{AccessMode::read_only, false, false}, path_);
  }
  std::string path_;
};

TEST_F(DirectIoAlignment, WhatTheFileSystemReportsIsUsed) {
  ReportedAlignment sys(8192, 512);
  auto fds = open(sys);
  ASSERT_TRUE(fds.ok()) << fds.status().to_string();
  if (!fds->direct_available()) GTEST_SKIP() << "this file system refuses O_DIRECT: " << fds->direct_note();
  EXPECT_EQ(sys.asked, 1) << "asked once, of the O_DIRECT descriptor";
  EXPECT_EQ(fds->direct_offset_alignment(), 8192u);
  EXPECT_EQ(fds->direct_memory_alignment(), 512u);
}

TEST_F(DirectIoAlignment, OffsetsAreNeverAlignedBelowFourKiB) {
  ReportedAlignment sys(512, 4);
  auto fds = open(sys);
  ASSERT_TRUE(fds.ok()) << fds.status().to_string();
  if (!fds->direct_available()) GTEST_SKIP() << "this file system refuses O_DIRECT: " << fds->direct_note();
  EXPECT_EQ(fds->direct_offset_alignment(), 4096u);
  EXPECT_EQ(fds->direct_memory_alignment(), 16u);
}

TEST_F(DirectIoAlignment, NothingReportedOrAFailedStatxKeepsTheDefaults) {
  ReportedAlignment silent(0, 0);
  auto quiet = open(silent);
  ASSERT_TRUE(quiet.ok()) << quiet.status().to_string();
  if (!quiet->direct_available()) GTEST_SKIP() << "this file system refuses O_DIRECT: " << quiet->direct_note();
  EXPECT_EQ(quiet->direct_offset_alignment(), 4096u);
  EXPECT_EQ(quiet->direct_memory_alignment(), 4096u);

  ScriptedSyscalls failing;
  failing.add(Rule::on(Op::direct_io_alignment).fail(EIO));
  auto fds = open(failing);
  ASSERT_TRUE(fds.ok()) << "a failed statx is no reason to refuse the file: " << fds.status().to_string();
  EXPECT_EQ(failing.count(Op::direct_io_alignment), 1);
  EXPECT_EQ(fds->direct_offset_alignment(), 4096u);
  EXPECT_EQ(fds->direct_memory_alignment(), 4096u);
}

}  // namespace
}  // namespace ferry::detail
