// Syscalls implemented by the kernel: the production side of the seam.
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include <cerrno>

#include "base/fork_guard.hpp"
#include "base/host_memory.hpp"
#include "source/syscalls.hpp"

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
  ssize_t pread_nowait(int fd, void* buf, std::size_t count, off_t offset) override {
    iovec one{buf, count};
    return or_errno(::preadv2(fd, &one, 1, offset, RWF_NOWAIT));
  }
  int cached_pages(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t* cached,
                   std::uint64_t* total) override;
  int fstat(int fd, struct stat* st) override { return or_errno(::fstat(fd, st)); }
  off_t seek_end(int fd) override { return or_errno(::lseek(fd, 0, SEEK_END)); }
  int clear_nonblocking(int fd) override {
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) return -errno;
    return or_errno(::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK));
  }
  int direct_io_alignment(int fd, std::uint64_t* offset_align, std::uint64_t* memory_align) override;
  int fdatasync(int fd) override { return or_errno(::fdatasync(fd)); }
  int ftruncate(int fd, off_t length) override { return or_errno(::ftruncate(fd, length)); }
};

// statx's O_DIRECT alignment fields (Linux 6.1). Declared here when the C library is older.
#ifndef STATX_DIOALIGN
constexpr unsigned kStatxDioAlign = 0x00002000U;
#else
constexpr unsigned kStatxDioAlign = STATX_DIOALIGN;
#endif

int RealSyscalls::direct_io_alignment(int fd, std::uint64_t* offset_align, std::uint64_t* memory_align) {
  struct statx stx;
  std::memset(&stx, 0, sizeof stx);
  if (::statx(fd, "", AT_EMPTY_PATH, kStatxDioAlign, &stx) != 0) return -errno;
  const bool reported = (stx.stx_mask & kStatxDioAlign) != 0;
  *offset_align = reported ? stx.stx_dio_offset_align : 0;
  *memory_align = reported ? stx.stx_dio_mem_align : 0;
  return 0;
}

// cachestat(2)'s ABI (include/uapi/linux/mman.h), declared here for C libraries that predate it.
struct CachestatRange {
  std::uint64_t off;
  std::uint64_t len;
};
struct Cachestat {
  std::uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
constexpr long kSysCachestat = 451;  // the same number on every architecture

std::atomic<bool> no_cachestat{false};  // cachestat answered ENOSYS once: mincore from then on

int mincore_pages(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t* cached) {
  const std::uint64_t page = system_page_bytes();  // a mapping starts on one, and mincore says one byte each
  std::uint64_t start = offset & ~(page - 1);
  std::size_t span = static_cast<std::size_t>(offset + length - start);
  void* map = ::mmap(nullptr, span, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  if (map == MAP_FAILED) return -errno;
  std::vector<unsigned char> resident((span + page - 1) / page);
  int rc = ::mincore(map, span, resident.data()) == 0 ? 0 : -errno;
  ::munmap(map, span);
  if (rc != 0) return rc;
  *cached = 0;
  for (unsigned char r : resident) *cached += r & 1;
  return 0;
}

int RealSyscalls::cached_pages(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t* cached,
                               std::uint64_t* total) {
  const std::uint64_t page = system_page_bytes();  // what cachestat counts in
  *total = ((offset + length + page - 1) / page) - offset / page;
  if (!no_cachestat.load(std::memory_order_relaxed)) {
    CachestatRange range{offset, length};
    Cachestat cs{};
    if (::syscall(kSysCachestat, fd, &range, &cs, 0) == 0) {
      *cached = std::min(cs.nr_cache, *total);
      return 0;
    }
    if (errno != ENOSYS) return -errno;
    no_cachestat.store(true, std::memory_order_relaxed);
  }
  return mincore_pages(fd, offset, length, cached);
}

}  // namespace

const char* cached_pages_method() { return no_cachestat.load(std::memory_order_relaxed) ? "mincore" : "cachestat"; }

Syscalls& real_syscalls() {
  static constinit std::atomic<RealSyscalls*> instance{nullptr};  // every File::open asks: no guard (fork_guard.hpp)
  return made_once(instance, [] { return new RealSyscalls; });
}

}  // namespace ferry::detail
