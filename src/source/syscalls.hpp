// The system-call seam: every file system call the I/O engine makes goes through a Syscalls object,
// so that tests can script faults (short reads, EINTR, EIO at a chosen offset, ENOSPC, O_DIRECT refused)
// without touching a real disk. Functions return -errno on failure, never set errno for the caller.
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>

namespace ferry::detail {

class Syscalls {
 public:
  virtual ~Syscalls() = default;
  /// open(2): a descriptor, or -errno.
  virtual int open(const char* path, int flags, mode_t mode) = 0;
  virtual int close(int fd) = 0;
  /// pread(2)/pwrite(2): bytes transferred (possibly fewer than asked), or -errno.
  virtual ssize_t pread(int fd, void* buf, std::size_t count, off_t offset) = 0;
  virtual ssize_t pwrite(int fd, const void* buf, std::size_t count, off_t offset) = 0;
  /// preadv2(2) with RWF_NOWAIT: reads only what the page cache holds, never waiting for the device. Bytes
  /// (fewer than asked where only a prefix is cached), -EAGAIN where the first page is not cached, or
  /// -errno (-EOPNOTSUPP: not on this file or kernel). On a miss the kernel has already begun reading the
  /// pages in (readahead): a buffered pread that follows waits for that read instead of starting another.
  virtual ssize_t pread_nowait(int fd, void* buf, std::size_t count, off_t offset) = 0;
  /// How much of [offset, offset + length) is in the page cache, without causing any I/O: cachestat(2)
  /// (Linux 6.5), else mincore(2) on a mapping of the range. Sets the counts of pages (of system_page_bytes():
  /// 64 KiB on some arm64 kernels) and returns 0, or -errno
  /// (-ENOSYS: neither works here). Unlike pread_nowait, this never starts readahead.
  virtual int cached_pages(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t* cached,
                           std::uint64_t* total) = 0;
  virtual int fstat(int fd, struct stat* st) = 0;
  /// lseek(fd, 0, SEEK_END): the size of a block device (fstat says 0 for those), or -errno.
  virtual off_t seek_end(int fd) = 0;
  /// Clears O_NONBLOCK (descriptors are opened with it so that opening a FIFO cannot hang). 0 or -errno.
  virtual int clear_nonblocking(int fd) = 0;
  /// statx(2) with STATX_DIOALIGN (Linux 6.1): O_DIRECT's offset and memory alignment for `fd`. 0 with both
  /// set (0 where the kernel or the file system does not report them), or -errno.
  virtual int direct_io_alignment(int fd, std::uint64_t* offset_align, std::uint64_t* memory_align) = 0;
  virtual int fdatasync(int fd) = 0;
  virtual int ftruncate(int fd, off_t length) = 0;
};

/// The real system calls.
Syscalls& real_syscalls();

/// Which probe real_syscalls().cached_pages() uses on this kernel: "cachestat" or "mincore" (decided by
/// the first call; "cachestat" before any).
const char* cached_pages_method();

}  // namespace ferry::detail
