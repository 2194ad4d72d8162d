// A file descriptor that closes itself, for everything but the engine's own descriptors (those live in
// src/source, FileDescriptors): output files and their directories, the page-cache probe, the CLI's and the
// benchmark's plain reads and writes (one of the headers of src/ the tools may include).
// Thread safety: one UniqueFd per owner; the descriptor itself may be used from any thread.
#pragma once

#include <string>

#include "ferry/status.hpp"

namespace ferry::detail {

class UniqueFd {
 public:
  UniqueFd() = default;
  /// Takes ownership of `fd` (a negative value: none).
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  /// Closes the descriptor; close(2)'s error is ignored (nothing could be done about it here).
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Gives the descriptor up without closing it.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/// open(path, flags | O_CLOEXEC) as a UniqueFd (no O_CREAT: nothing is made). Errors: open(2)'s errno as a
/// Status naming `path`, "Could not open "<path>" for <what>" (what: "reading", "writing with O_DIRECT", ...),
/// saying so where O_DIRECT was asked for and the file system refused it (EINVAL).
[[nodiscard]] Result<UniqueFd> open_fd(const std::string& path, int flags, const std::string& what);

}  // namespace ferry::detail
