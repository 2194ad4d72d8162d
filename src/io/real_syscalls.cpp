// Syscalls implemented by the kernel: the production side of the seam.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "io/syscalls.hpp"

namespace ferry::detail {
namespace {

template <typename T>
T or_errno(T rc) {
  return rc < 0 ? static_cast<T>(-errno) : rc;
}

class RealSyscalls final : public Syscalls {
 public:
  int open(const char* path, int flags, mode_t mode) override {
    return or_errno(::open(path, flags | O_CLOEXEC, mode));
  }
  int close(int fd) override { return or_errno(::close(fd)); }
  ssize_t pread(int fd, void* buf, std::size_t count, off_t offset) override {
    return or_errno(::pread(fd, buf, count, offset));
  }
  ssize_t pwrite(int fd, const void* buf, std::size_t count, off_t offset) override {
    return or_errno(::pwrite(fd, buf, count, offset));
  }
  ssize_t preadv2(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags) override {
    return or_errno(::preadv2(fd, iov, iovcnt, offset, flags));
  }
  int fstat(int fd, struct stat* st) override { return or_errno(::fstat(fd, st)); }
  int fdatasync(int fd) override { return or_errno(::fdatasync(fd)); }
  int ftruncate(int fd, off_t length) override { return or_errno(::ftruncate(fd, length)); }
};

}  // namespace

Syscalls& real_syscalls() {
  static RealSyscalls instance;
  return instance;
}

}  // namespace ferry::detail
