// Opening a file twice (buffered and O_DIRECT) and learning O_DIRECT's alignment.
#include "source/file_descriptors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

namespace ferry::detail {
namespace {

// O_DIRECT's alignment as the file system reports it; where it does not (or statx fails), the defaults stay.
void query_direct_alignment(Syscalls& sys, int fd, std::uint64_t* offset_align, std::uint64_t* memory_align) {
  std::uint64_t offset = 0, memory = 0;
  if (sys.direct_io_alignment(fd, &offset, &memory) != 0 || offset == 0) return;
  // Never below 4 KiB for offsets: tasks are split on 4 KiB boundaries, which every device accepts.
  *offset_align = std::max<std::uint64_t>(4096, offset);
  *memory_align = std::max<std::uint64_t>(16, memory);
}

int access_bits(AccessMode a) {
  switch (a) {
    case AccessMode::read_only: return O_RDONLY;
    case AccessMode::write_only: return O_WRONLY;
    case AccessMode::read_write: return O_RDWR;
  }
  return O_RDONLY;
}

}  // namespace

Result<OpenFlags> parse_open_mode(std::string_view mode, bool* append) {
  std::string m;
  for (char c : mode) {
    if (c != 'b') m += c;
  }
  *append = false;
  if (m == "r") return OpenFlags{AccessMode::read_only, false, false};
  if (m == "r+") return OpenFlags{AccessMode::read_write, false, false};
  if (m == "w") return OpenFlags{AccessMode::write_only, true, true};
  if (m == "w+") return OpenFlags{AccessMode::read_write, true, true};
  if (m == "a") {
    *append = true;
    return OpenFlags{AccessMode::write_only, true, false};
  }
  return Status(ErrorCode::invalid_argument,
                fmt::format("unknown open mode \"{}\" (expected \"r\", \"w\", \"r+\" or \"a\")", mode));
}

namespace {

// Refuses what cannot be read or written at offsets, naming it as `ls -l` would.
Status check_file_type(const struct stat& st, const std::string& path, FileKind* kind) {
  if (S_ISDIR(st.st_mode)) {
    return Status(ErrorCode::is_a_directory, fmt::format("\"{}\" is a directory, not a file", path), EISDIR, path);
  }
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("\"{}\" is a {}: Ferry reads and writes at file offsets, which it cannot do", path,
                              S_ISFIFO(st.st_mode) ? "FIFO (named pipe)" : "socket"),
                  ESPIPE, path);
  }
  *kind = S_ISREG(st.st_mode) ? FileKind::regular : S_ISBLK(st.st_mode) ? FileKind::block_device
                                                                        : FileKind::character_device;
  return Status();
}

}  // namespace

Result<FileDescriptors> FileDescriptors::open(Syscalls& sys, const std::string& path, const OpenFlags& flags,
                                              const std::string& name) {
  FileDescriptors fds(sys);
  const std::string& shown = name.empty() ? path : name;
  int base = access_bits(flags.access);
  int create = (flags.create ? O_CREAT : 0) | (flags.truncate ? O_TRUNC : 0);
  // O_NONBLOCK: opening a FIFO would otherwise wait for its other end forever. Cleared below.
  int fd = sys.open(path.c_str(), base | create | O_NONBLOCK | O_NOCTTY, 0644);
  if (fd < 0) {
    return Status::from_errno(-fd, fmt::format("Could not open \"{}\"", shown), shown);
  }
  fds.buffered_fd_ = fd;
  struct stat st;
  int rc = sys.fstat(fd, &st);
  if (rc < 0) return Status::from_errno(-rc, fmt::format("Could not stat \"{}\"", shown), shown);
  FERRY_RETURN_IF_ERROR(check_file_type(st, shown, &fds.kind_));
  rc = sys.clear_nonblocking(fd);
  if (rc < 0) return Status::from_errno(-rc, fmt::format("Could not set up \"{}\" for reading", shown), shown);
  if (fds.kind_ == FileKind::character_device) {
    fds.direct_note_ = "not a regular file: buffered I/O only";
    return fds;
  }
  // The second descriptor is the same open file, reached through this process's descriptor table rather
  // than the name: a file renamed over `path` after the first open cannot end up behind it. It never
  // creates or truncates (the first open did that).
  std::string self = fmt::format("/proc/self/fd/{}", fd);
  int dfd = sys.open(self.c_str(), base | O_DIRECT, 0);
  if (dfd == -ENOENT) dfd = sys.open(path.c_str(), base | O_DIRECT, 0);  // no /proc: by name, checked below
  if (dfd >= 0) {
    struct stat dst;
    rc = sys.fstat(dfd, &dst);
    if (rc < 0 || dst.st_dev != st.st_dev || dst.st_ino != st.st_ino) {
      (void)sys.close(dfd);
      fds.direct_note_ = fmt::format("\"{}\" was replaced while it was being opened: O_DIRECT is not used", shown);
      return fds;
    }
    fds.direct_fd_ = dfd;
    query_direct_alignment(sys, dfd, &fds.offset_align_, &fds.memory_align_);
  } else {
    fds.direct_note_ = fmt::format("the file system refused O_DIRECT for \"{}\" ({}: {}); buffered I/O is used",
                                   shown, errno_name(-dfd), std::strerror(-dfd));
  }
  return fds;
}

FileDescriptors::FileDescriptors(FileDescriptors&& o) noexcept
    : sys_(o.sys_),
      buffered_fd_(o.buffered_fd_),
      direct_fd_(o.direct_fd_),
      kind_(o.kind_),
      direct_note_(std::move(o.direct_note_)),
      offset_align_(o.offset_align_),
      memory_align_(o.memory_align_) {
  o.buffered_fd_ = -1;
  o.direct_fd_ = -1;
}

FileDescriptors::~FileDescriptors() { (void)close(); }

Status FileDescriptors::close() {
  Status first;
  for (int* fd : {&direct_fd_, &buffered_fd_}) {
    if (*fd < 0) continue;
    int rc = sys_->close(*fd);
    if (rc < 0 && first.ok()) first = Status::from_errno(-rc, "Could not close file");
    *fd = -1;
  }
  return first;
}

}  // namespace ferry::detail
