// ferry::page_cache: the page-cache probe Ferry's reads use (Syscalls::cached_pages), and eviction.
#include "ferry/page_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "base/host_memory.hpp"
#include "base/unique_fd.hpp"
#include "source/syscalls.hpp"

namespace ferry::page_cache {
namespace {


using detail::UniqueFd;

Result<UniqueFd> open_for_probe(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not hang; it is refused below.
  return detail::open_fd(path, O_RDONLY | O_NONBLOCK, "reading");
}

Result<Residency> probe(int fd, const std::string& path, std::uint64_t offset, std::uint64_t length) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::from_errno(errno, fmt::format("Could not stat \"{}\"", path), path);
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("Could not ask the page cache about \"{}\": not a regular file", path), EINVAL, path);
  }
  Residency r;
  r.page_bytes = detail::system_page_bytes();  // the unit Syscalls::cached_pages counts in
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (offset >= size) {
    r.method = detail::cached_pages_method();
    return r;
  }
  r.range_bytes = std::min(length, size - offset);
  std::uint64_t cached = 0, total = 0;
  int rc = detail::real_syscalls().cached_pages(fd, offset, r.range_bytes, &cached, &total);
  r.method = detail::cached_pages_method();
  if (rc < 0) {
    return Status::from_errno(-rc,
                              fmt::format("Could not ask the page cache about {} bytes at offset {} of \"{}\" ({})",
                                          r.range_bytes, offset, path, r.method),
                              path);
  }
  r.cached_bytes = std::min(cached * r.page_bytes, r.range_bytes);
  return r;
}

}  // namespace

Result<Residency> residency(const std::string& path, std::uint64_t offset, std::uint64_t length) {
  FERRY_ASSIGN_OR_RETURN(UniqueFd fd, open_for_probe(path));
  return probe(fd.get(), path, offset, length);
}

Result<Residency> evict(const std::string& path, bool write_back_first) {
  FERRY_ASSIGN_OR_RETURN(UniqueFd fd, open_for_probe(path));
  struct stat st;
  if (::fstat(fd.get(), &st) == 0 && !S_ISREG(st.st_mode)) return probe(fd.get(), path, 0, kToEnd);  // the error
  if (write_back_first && ::fdatasync(fd.get()) != 0) {
    return Status::from_errno(errno, fmt::format("Could not write \"{}\" back before evicting it", path), path);
  }
  if (int rc = ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED); rc != 0) {
    return Status::from_errno(rc, fmt::format("Could not evict \"{}\" from the page cache (posix_fadvise)", path),
                              path);
  }
  return probe(fd.get(), path, 0, kToEnd);
}

}  // namespace ferry::page_cache
