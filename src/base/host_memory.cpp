// Page-aligned host memory: see base/host_memory.hpp.
#include "base/host_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "ferry/config.hpp"

namespace ferry::detail {

std::uint64_t system_page_bytes() {
  // Asked each time (the C library keeps it; no system call): a static's first-use guard held by another
  // thread at a fork() would hang the child.
  const long bytes = ::sysconf(_SC_PAGESIZE);
  return bytes > 0 ? static_cast<std::uint64_t>(bytes) : std::uint64_t{4096};
}

std::uint64_t HostMemory::whole_pages(std::uint64_t size_bytes) {
  const std::uint64_t page = system_page_bytes();
  return (std::max<std::uint64_t>(size_bytes, 1) + page - 1) / page * page;
}

Result<HostMemory> HostMemory::allocate(std::uint64_t size_bytes, Touch touch) {
  const std::uint64_t bytes = whole_pages(size_bytes);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    // ENOMEM is unavailable, as everywhere in Ferry (Status::from_errno): memory, not disk space (no_space).
    return Status::from_errno(errno, fmt::format("Could not allocate {} of host memory", format_size(size_bytes)));
  }
  (void)::madvise(p, bytes, MADV_HUGEPAGE);
  // Populated after the advice, so that the pages populated can be huge ones.
  if (touch == Touch::now) (void)::madvise(p, bytes, MADV_POPULATE_WRITE);
  return HostMemory(static_cast<std::uint8_t*>(p), size_bytes);
}

HostMemory::HostMemory(HostMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_bytes_(o.size_bytes_) {}

HostMemory& HostMemory::operator=(HostMemory&& o) noexcept {
  if (this != &o) {
    free_released(data_, size_bytes_);
    data_ = std::exchange(o.data_, nullptr);
    size_bytes_ = o.size_bytes_;
  }
  return *this;
}

HostMemory::~HostMemory() { free_released(data_, size_bytes_); }

std::uint8_t* HostMemory::release() { return std::exchange(data_, nullptr); }

void HostMemory::free_released(void* data, std::uint64_t size_bytes) noexcept {
  if (data != nullptr) (void)::munmap(data, whole_pages(size_bytes));
}

}  // namespace ferry::detail
