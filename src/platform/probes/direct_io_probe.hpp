// Direct I/O on a real file: the alignment the kernel asks for (statx STATX_DIOALIGN, Linux >= 6.1) and
// whether open(O_DIRECT) is accepted. These read the live system; there is no root parameter.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace ferry::detail::probes {

struct DioAlignProbe {
  bool supported = false;            // the kernel and file system answered STATX_DIOALIGN
  std::uint32_t mem_align_bytes = 0;    // stx_dio_mem_align; 0 with supported=true: no direct I/O on this file
  std::uint32_t offset_align_bytes = 0; // stx_dio_offset_align
  int sys_errno = 0;                 // statx failure (ENOENT, ENOSYS, ...), else 0
  std::string detail;                // one sentence for the report
  /// The file allows direct I/O, per statx.
  bool direct_io_allowed() const { return supported && mem_align_bytes != 0 && offset_align_bytes != 0; }
};

/// statx(path, STATX_DIOALIGN). `supported` is false when the kernel is older than 6.1, the file system
/// does not report it, or statx itself fails (then sys_errno says why).
DioAlignProbe probe_dio_align(const std::filesystem::path& path);

struct ODirectOpenProbe {
  bool opened = false;  // open(O_RDONLY | O_DIRECT) succeeded (and was closed again)
  int sys_errno = 0;    // EINVAL: the file system refuses O_DIRECT (e.g. older tmpfs); ENOENT, EACCES, ...
  std::string detail;
};

/// Tries open(path, O_RDONLY | O_DIRECT | O_CLOEXEC). Opening is not proof that aligned reads will
/// work, but EINVAL here is proof that they will not.
ODirectOpenProbe probe_odirect_open(const std::filesystem::path& path);

}  // namespace ferry::detail::probes
