// statx DIOALIGN and O_DIRECT probes.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "platform/probes/direct_io_probe.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "ferry/status.hpp"

// Headers older than Linux 6.1 lack the flag and the fields. The fields sit in what were spare words
// of the fixed 256-byte struct statx, so we read them by offset in that case.
#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#define FERRY_STATX_NO_DIO_FIELDS 1
#endif

namespace ferry::detail::probes {

static_assert(sizeof(struct statx) == 256, "struct statx is fixed at 256 bytes by the kernel ABI");
inline constexpr std::size_t kStatxDioMemAlignOffset = 0x98;
inline constexpr std::size_t kStatxDioOffsetAlignOffset = 0x9c;
#ifndef FERRY_STATX_NO_DIO_FIELDS
static_assert(offsetof(struct statx, stx_dio_mem_align) == kStatxDioMemAlignOffset);
static_assert(offsetof(struct statx, stx_dio_offset_align) == kStatxDioOffsetAlignOffset);
#endif

DioAlignProbe probe_dio_align(const std::filesystem::path& path) {
  DioAlignProbe p;
  struct statx stx;
  std::memset(&stx, 0, sizeof stx);
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_DIOALIGN, &stx) != 0) {
    p.sys_errno = errno;
    p.detail = fmt::format("statx(\"{}\") failed: {}", path.string(), errno_name(p.sys_errno));
    return p;
  }
  if ((stx.stx_mask & STATX_DIOALIGN) == 0) {
    p.detail = fmt::format("statx(\"{}\"): no STATX_DIOALIGN in the reply (kernel older than 6.1, or the file "
                           "system does not report it)",
                           path.string());
    return p;
  }
  p.supported = true;
  const auto* raw = reinterpret_cast<const unsigned char*>(&stx);
  std::memcpy(&p.mem_align_bytes, raw + kStatxDioMemAlignOffset, sizeof p.mem_align_bytes);
  std::memcpy(&p.offset_align_bytes, raw + kStatxDioOffsetAlignOffset, sizeof p.offset_align_bytes);
  p.detail = p.direct_io_allowed()
                 ? fmt::format("statx(\"{}\"): direct I/O needs memory aligned to {} and offsets/sizes to {} bytes",
                               path.string(), p.mem_align_bytes, p.offset_align_bytes)
                 : fmt::format("statx(\"{}\"): direct I/O is not supported on this file (alignment 0)", path.string());
  return p;
}

ODirectOpenProbe probe_odirect_open(const std::filesystem::path& path) {
  ODirectOpenProbe p;
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    p.sys_errno = errno;
    p.detail = fmt::format("open(\"{}\", O_DIRECT) failed: {}{}", path.string(), errno_name(p.sys_errno),
                           p.sys_errno == EINVAL ? " (the file system refuses O_DIRECT)" : "");
    return p;
  }
  ::close(fd);
  p.opened = true;
  p.detail = fmt::format("open(\"{}\", O_DIRECT) succeeded", path.string());
  return p;
}

}  // namespace ferry::detail::probes
