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
  /// preadv2(2) with flags (RWF_NOWAIT): bytes, or -errno (-EAGAIN: not all in the page cache;
  /// -EOPNOTSUPP/-ENOSYS: not supported here).
  virtual ssize_t preadv2(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags) = 0;
  virtual int fstat(int fd, struct stat* st) = 0;
  virtual int fdatasync(int fd) = 0;
  virtual int ftruncate(int fd, off_t length) = 0;
};

/// The real system calls.
Syscalls& real_syscalls();

}  // namespace ferry::detail
