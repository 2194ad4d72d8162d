// Aligned host buffers that O_DIRECT reads land in when the caller's memory cannot take them: a buffer that
// is not aligned for O_DIRECT (NumPy's and PyTorch's allocations are 16 or 64 bytes past a page), or a task
// whose bytes go to several places (a scattered read into host memory). The read goes to the disk at full
// speed and one memory copy puts the bytes in place; through the page cache the same cold read was 6-10x
// slower on the CPU machine (the newcomer review, 2026-12-04).
// The buffers are kept for the process (pages already faulted in, on huge pages where the kernel gives them).
// Thread safety: borrowing and returning may happen on any thread; a HostBounce is used by one thread.
#pragma once

#include <cstdint>

namespace ferry::detail {

/// Bytes of one bounce buffer: a task larger than this is read in pieces of this size.
inline constexpr std::uint64_t kHostBounceBytes = 4ull << 20;

/// A bounce buffer lent from the process's pool for the object's lifetime (nullptr data(): none could be
/// made, the caller reads another way).
class HostBounce {
 public:
  HostBounce();
  ~HostBounce();
  HostBounce(const HostBounce&) = delete;
  HostBounce& operator=(const HostBounce&) = delete;
  /// kHostBounceBytes of page-aligned memory, or nullptr when memory was short.
  char* data() const { return data_; }

 private:
  char* data_;
};

}  // namespace ferry::detail
