// A descriptor that closes itself: see base/unique_fd.hpp.
#include "base/unique_fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace ferry::detail {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<UniqueFd> open_fd(const std::string& path, int flags, const std::string& what) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd >= 0) return UniqueFd(fd);
  const int e = errno;
  return Status::from_errno(e,
                            fmt::format("Could not open \"{}\" for {}{}", path, what,
                                        (flags & O_DIRECT) && e == EINVAL ? " (the file system refuses O_DIRECT)" : ""),
                            path);
}

}  // namespace ferry::detail
