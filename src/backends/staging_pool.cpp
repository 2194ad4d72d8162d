// StagingPool: pinned bounce buffers, streams and events, created once and reused.
#include "backends/staging_pool.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>

#include "backends/numa_placement.hpp"
#include "base/setup_ledger.hpp"
#include "platform/cuda/primary_context.hpp"

#include <fmt/format.h>

namespace ferry::detail {
namespace {

constexpr std::size_t kHugePage = 2u << 20;

std::atomic<std::uint64_t> g_pinned_bytes{0};  // every kit's buffers, from creation to destroy_kit

// Maps `bytes` (a multiple of 2 MiB) aligned to 2 MiB, on `node` when it is not -1, asks for huge pages,
// and faults them in.
void* map_huge_region(std::size_t bytes, int node) {
  std::size_t span = bytes + kHugePage;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto start = (reinterpret_cast<std::uintptr_t>(raw) + kHugePage - 1) & ~std::uintptr_t{kHugePage - 1};
  auto* aligned = reinterpret_cast<char*>(start);
  // Trim the slack on both sides so that only the aligned region stays mapped.
  std::size_t head = static_cast<std::size_t>(aligned - static_cast<char*>(raw));
  if (head) ::munmap(raw, head);
  if (span - head - bytes) ::munmap(aligned + bytes, span - head - bytes);
  if (node >= 0) (void)prefer_node(aligned, bytes, node);
  (void)::madvise(aligned, bytes, MADV_HUGEPAGE);
  (void)::madvise(aligned, bytes, MADV_POPULATE_WRITE);
  return aligned;
}

// Pins every buffer of `kit` as one registered huge-page region; false (and nothing held) when the
// region cannot be mapped or registered, so the caller falls back to cuMemHostAlloc.
bool pin_huge_region(const CudaApi& api, StagingKit& kit, unsigned count) {
  std::size_t bytes = (static_cast<std::size_t>(kit.buffer_size) * count + kHugePage - 1) / kHugePage * kHugePage;
  void* region = map_huge_region(bytes, kit.numa_node);
  if (region == nullptr) return false;
  if (api.cuMemHostRegister_v2(region, bytes, kMemHostRegisterPortable) != CUDA_SUCCESS) {
    ::munmap(region, bytes);
    return false;
  }
  kit.region = region;
  kit.region_bytes = bytes;
  for (unsigned i = 0; i < count; ++i) kit.buffers.push_back(static_cast<char*>(region) + i * kit.buffer_size);
  return true;
}

// The NUMA node for `device`'s bounce buffers, asked of the driver once per device (kits are made rarely).
int bounce_node(const CudaApi& api, int device) {
  static const int nodes = online_numa_nodes();
  if (nodes <= 1) return -1;
  auto info = describe_device(api, device);
  return info.ok() ? bounce_buffer_node(info->host_numa_id, nodes) : -1;
}

bool has_shape(const StagingKit& k, const CudaApi& api, int device, std::uint64_t buffer_size, unsigned count) {
  return k.api == &api && k.device == device && k.buffer_size == buffer_size && k.buffers.size() == count;
}

}  // namespace

void destroy_kit(StagingKit& kit) {
  if (kit.api == nullptr) return;
  const CudaApi& api = *kit.api;
  // The stream goes first: a kit destroyed because waiting for its copies failed may still have copies
  // queued from its buffers, and a destroyed stream's queued work still completes.
  if (kit.stream) (void)api.cuStreamDestroy_v2(kit.stream);
  kit.stream = nullptr;
  for (CUevent e : kit.events) {
    if (e) (void)api.cuEventDestroy_v2(e);
  }
  g_pinned_bytes -= kit.pinned_bytes;
  kit.pinned_bytes = 0;
  if (kit.region != nullptr) {
    (void)api.cuMemHostUnregister(kit.region);
    ::munmap(kit.region, kit.region_bytes);
    kit.region = nullptr;
  } else {
    for (void* b : kit.buffers) {
      if (b) (void)api.cuMemFreeHost(b);
    }
  }
  kit.events.clear();
  kit.buffers.clear();
}

std::unique_ptr<StagingKit> StagingPool::take_idle(const CudaApi& api, int device, std::uint64_t buffer_size,
                                                   unsigned count) {
  // The kit released last: release() adds at the back, and taking the oldest instead made every small
  // request meet the kit that had been idle longest, its stream and buffers out of the caches (H200 machine,
  // two alternating rounds: 64 KiB reads with 64 in flight from 16 threads 1.03-1.08x, 1 MiB ones from one
  // thread 1.05-1.10x, one 1 MiB read at a time 0.83-0.88x of the time; bench/results/2026-12-03-h200-copy-wait).
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
    if (has_shape(**it, api, device, buffer_size, count)) {
      auto kit = std::move(*it);
      idle_.erase(std::next(it).base());
      ++in_use_;
      return kit;
    }
  }
  return nullptr;
}

// A new kit: a stream, `count` pinned buffers and their events. Counted nowhere yet.
Result<std::unique_ptr<StagingKit>> StagingPool::make_kit(const CudaApi& api, int device, std::uint64_t buffer_size,
                                                          unsigned count) {
  SetupTimer timer(SetupStep::pinned_buffers);
  auto kit = std::make_unique<StagingKit>();
  kit->api = &api;
  kit->device = device;
  kit->numa_node = bounce_node(api, device);
  kit->buffer_size = buffer_size;
  auto fail = [&](CUresult rc, std::string what) -> Status {
    Status s = cuda_check(api, rc, what);
    destroy_kit(*kit);
    return s;
  };
  // A blocking stream: its copies wait for work the caller queued on the legacy default stream (a
  // cudaMemset of the destination, a pageable cudaMemcpy still in flight), as the caller would expect.
  CUresult rc = api.cuStreamCreate(&kit->stream, CU_STREAM_DEFAULT);
  if (rc != CUDA_SUCCESS) return fail(rc, fmt::format("cuStreamCreate for GPU {}", device));
  const bool huge = pin_huge_region(api, *kit, count);
  for (unsigned i = 0; i < count; ++i) {
    if (!huge) {
      void* buffer = nullptr;
      rc = api.cuMemHostAlloc(&buffer, buffer_size, kMemHostAllocPortable);
      if (rc != CUDA_SUCCESS) {
        return fail(rc, fmt::format("cuMemHostAlloc of a {}-byte pinned bounce buffer", buffer_size));
      }
      kit->buffers.push_back(buffer);
    }
    CUevent event = nullptr;
    rc = api.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
    if (rc != CUDA_SUCCESS) return fail(rc, "cuEventCreate");
    kit->events.push_back(event);
  }
  kit->pinned_bytes = huge ? kit->region_bytes : buffer_size * count;
  g_pinned_bytes += kit->pinned_bytes;
  timer.set(1, kit->pinned_bytes);
  return kit;
}

Result<std::unique_ptr<StagingKit>> StagingPool::acquire(const CudaApi& api, int device,
                                                         std::uint64_t buffer_size, unsigned count) {
  if (auto kit = take_idle(api, device, buffer_size, count)) return kit;
  // Kits are made one at a time. Measured on the GPU machine (bench/results/2026-11-30-h200-pinning): the
  // 16 workers of a first request pinning their 8 MiB each at once took 40 ms before any of them could
  // start, one after another 31 ms, the first ready after 2 ms: first-touching the memory does not get faster
  // with threads, and the registrations contend. So a worker starts as soon as its own kit is made, while
  // later workers still wait, and a kit released meanwhile is taken instead of making another.
  std::lock_guard<std::mutex> making(making_mutex_);
  if (auto kit = take_idle(api, device, buffer_size, count)) return kit;
  FERRY_ASSIGN_OR_RETURN(auto kit, make_kit(api, device, buffer_size, count));
  std::lock_guard<std::mutex> lock(mutex_);
  ++in_use_;
  return kit;
}

bool StagingPool::holds(const CudaApi& api, int device, std::uint64_t buffer_size, unsigned count, unsigned kits) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto idle = std::count_if(idle_.begin(), idle_.end(),
                                  [&](const auto& k) { return has_shape(*k, api, device, buffer_size, count); });
  return static_cast<unsigned>(idle) + in_use_ >= kits;
}

Status StagingPool::reserve(const CudaApi& api, int device, std::uint64_t buffer_size, unsigned count,
                            unsigned kits) {
  while (!holds(api, device, buffer_size, count, kits)) {
    std::lock_guard<std::mutex> making(making_mutex_);
    if (holds(api, device, buffer_size, count, kits)) break;  // workers made some meanwhile
    FERRY_ASSIGN_OR_RETURN(auto kit, make_kit(api, device, buffer_size, count));
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(std::move(kit));
  }
  return Status();
}

void StagingPool::release(std::unique_ptr<StagingKit> kit) {
  std::lock_guard<std::mutex> lock(mutex_);
  --in_use_;
  idle_.push_back(std::move(kit));
}

void StagingPool::discard(std::unique_ptr<StagingKit> kit) {
  destroy_kit(*kit);
  std::lock_guard<std::mutex> lock(mutex_);
  --in_use_;
}

void StagingPool::clear() {
  std::vector<std::unique_ptr<StagingKit>> idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle.swap(idle_);
  }
  for (auto& k : idle) destroy_kit(*k);
}

std::uint64_t StagingPool::pinned_bytes() { return g_pinned_bytes.load(); }

StagingPool& process_staging_pool() {
  // Leaked on purpose: freeing pinned memory during static destruction races the driver's own teardown.
  static StagingPool* pool = new StagingPool();
  return *pool;
}

}  // namespace ferry::detail
