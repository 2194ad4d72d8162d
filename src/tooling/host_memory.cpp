// Page-aligned host memory: see ferry_tooling/host_memory.hpp.
#include "ferry_tooling/host_memory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "ferry/config.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry::tooling {
namespace {

constexpr std::uint64_t kPageBytes = 4096;

std::uint64_t mapped_bytes(std::uint64_t size_bytes) {
  return (std::max<std::uint64_t>(size_bytes, 1) + kPageBytes - 1) / kPageBytes * kPageBytes;
}

}  // namespace

Result<HostMemory> HostMemory::allocate(std::uint64_t size_bytes, Touch touch) {
  const std::uint64_t bytes = mapped_bytes(size_bytes);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    // ENOMEM is unavailable, as everywhere in Ferry (Status::from_errno): memory, not disk space (no_space).
    return Status::from_errno(errno, fmt::format("Could not allocate {} of host memory", format_size(size_bytes)));
  }
  (void)::madvise(p, bytes, MADV_HUGEPAGE);
  // Populated after the advice, so that the pages populated can be huge ones.
  if (touch == Touch::now) (void)::madvise(p, bytes, MADV_POPULATE_WRITE);
  return HostMemory(static_cast<std::uint8_t*>(p), size_bytes, -1);
}

Result<HostMemory> HostMemory::allocate_pinned(int device, std::uint64_t size_bytes) {
  const detail::CudaApi* api = detail::process_cuda_api();
  if (api == nullptr) {
    return Status(ErrorCode::unavailable,
                  fmt::format("cannot use GPU {}: {}", device, detail::process_cuda_status().message()));
  }
  detail::ScopedDeviceContext context(*api, device);
  FERRY_RETURN_IF_ERROR(context.status());
  const std::uint64_t bytes = mapped_bytes(size_bytes);
  void* p = nullptr;
  FERRY_RETURN_IF_ERROR(detail::cuda_check(*api, api->cuMemHostAlloc(&p, bytes, detail::kMemHostAllocPortable),
                                           fmt::format("cuMemHostAlloc of {} bytes", bytes)));
  return HostMemory(static_cast<std::uint8_t*>(p), size_bytes, device);
}

HostMemory::HostMemory(HostMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_bytes_(o.size_bytes_), device_(o.device_) {}

HostMemory& HostMemory::operator=(HostMemory&& o) noexcept {
  if (this != &o) {
    free();
    data_ = std::exchange(o.data_, nullptr);
    size_bytes_ = o.size_bytes_;
    device_ = o.device_;
  }
  return *this;
}

HostMemory::~HostMemory() { free(); }

void HostMemory::free() noexcept {
  if (data_ == nullptr) return;
  if (device_ < 0) {
    free_released(data_, size_bytes_);
  } else if (const detail::CudaApi* api = detail::process_cuda_api()) {
    detail::ScopedDeviceContext context(*api, device_);
    if (context.status().ok()) (void)api->cuMemFreeHost(data_);
  }
  data_ = nullptr;
}

std::uint8_t* HostMemory::release() {
  if (pinned()) return nullptr;
  return std::exchange(data_, nullptr);
}

void HostMemory::free_released(void* data, std::uint64_t size_bytes) noexcept {
  if (data != nullptr) (void)::munmap(data, mapped_bytes(size_bytes));
}

}  // namespace ferry::tooling
