// The two descriptors Ferry keeps per file: buffered, and O_DIRECT where the file system allows it.
#pragma once

#include <cstdint>
#include <string>

#include "ferry/status.hpp"
#include "source/syscalls.hpp"

namespace ferry::detail {

enum class AccessMode { read_only, write_only, read_write };

struct OpenFlags {
  AccessMode access = AccessMode::read_only;
  bool create = false;
  bool truncate = false;
};

/// Parses "r", "w", "r+", "a" (also with a "b", as Python spells them). `append` is set for "a".
Result<OpenFlags> parse_open_mode(std::string_view mode, bool* append);

/// What the descriptors refer to. Only regular files and block devices have a size Ferry can plan by.
enum class FileKind { regular, block_device, character_device };

class FileDescriptors {
 public:
  /// Opens `path` once, buffered, then reopens that same open file (through /proc/self/fd, so a file
  /// renamed over `path` in between cannot be mixed in) with O_DIRECT. A refused O_DIRECT open is not
  /// an error: it is recorded in direct_note(). Opening never blocks (a FIFO is refused, not waited on).
  /// Errors: not_found, permission_denied, is_a_directory (a directory is refused even for reading),
  /// invalid_argument (a FIFO or socket, which cannot be read at offsets), each naming the path, or `name`
  /// where given: the file's name for messages when it is opened by another path (an unnamed temporary
  /// file, reached through /proc/self/fd).
  static Result<FileDescriptors> open(Syscalls& sys, const std::string& path, const OpenFlags& flags,
                                      const std::string& name = {});

  FileDescriptors(FileDescriptors&& other) noexcept;
  FileDescriptors& operator=(FileDescriptors&&) = delete;
  ~FileDescriptors();

  int buffered_fd() const { return buffered_fd_; }
  int direct_fd() const { return direct_fd_; }  // -1 when unavailable
  bool direct_available() const { return direct_fd_ >= 0; }
  const std::string& direct_note() const { return direct_note_; }
  FileKind kind() const { return kind_; }
  /// Alignment O_DIRECT needs of file offsets and lengths, and of memory addresses (powers of two).
  std::uint64_t direct_offset_alignment() const { return offset_align_; }
  std::uint64_t direct_memory_alignment() const { return memory_align_; }
  Status close();

 private:
  FileDescriptors(Syscalls& sys) : sys_(&sys) {}
  Syscalls* sys_;
  int buffered_fd_ = -1;
  int direct_fd_ = -1;
  FileKind kind_ = FileKind::regular;
  std::string direct_note_;
  std::uint64_t offset_align_ = 4096;
  std::uint64_t memory_align_ = 4096;
};

}  // namespace ferry::detail
