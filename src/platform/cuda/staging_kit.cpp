// Staging kits: huge-page regions pinned with cuMemHostRegister (cuMemHostAlloc where that fails).
#include "platform/cuda/staging_kit.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>

#include <fmt/format.h>

#include "base/atomic_max.hpp"
#include "base/setup_ledger.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/numa_placement.hpp"

namespace ferry::detail {
namespace {

constexpr std::size_t kHugePage = 2u << 20;

std::atomic<std::uint64_t> g_pinned_bytes{0};  // every kit's buffers, from creation to destroy_kit
std::atomic<std::uint64_t> g_peak_pinned_bytes{0};

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

// Pins every buffer of `kit` as one registered huge-page region on `node` (-1: anywhere); false (and nothing
// held) when the region cannot be mapped or registered, so the caller falls back to cuMemHostAlloc.
bool pin_huge_region(const CudaApi& api, StagingKit& kit, unsigned count, int node) {
  const std::size_t bytes = kit_charge(kit.buffer_size, count);
  void* region = map_huge_region(bytes, node);
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

// The NUMA node for `device`'s bounce buffers, asked of the driver for each kit made (kits are made rarely).
int bounce_node(const CudaApi& api, int device) {
  static constinit std::atomic<int> known_nodes{0};  // 0: not asked yet (no first-use guard: fork_guard.hpp)
  int nodes = known_nodes.load(std::memory_order_relaxed);
  if (nodes == 0) {
    nodes = online_numa_nodes();
    known_nodes.store(nodes, std::memory_order_relaxed);
  }
  if (nodes <= 1) return -1;
  auto info = describe_device(api, device);
  return info.ok() ? bounce_buffer_node(info->host_numa_id, nodes) : -1;
}


}  // namespace

std::uint64_t kit_charge(std::uint64_t buffer_size, unsigned count) {
  return (buffer_size * count + kHugePage - 1) / kHugePage * kHugePage;
}

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

Result<std::unique_ptr<StagingKit>> make_kit(const CudaApi& api, int device, std::uint64_t buffer_size,
                                             unsigned count) {
  SetupTimer timer(SetupStep::pinned_buffers);
  auto kit = std::make_unique<StagingKit>();
  kit->api = &api;
  kit->device = device;
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
  const bool huge = pin_huge_region(api, *kit, count, bounce_node(api, device));
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
  raise_to_max(g_peak_pinned_bytes, g_pinned_bytes += kit->pinned_bytes);
  timer.set(1, kit->pinned_bytes);
  return kit;
}

std::uint64_t kit_pinned_bytes() { return g_pinned_bytes.load(); }
std::uint64_t peak_kit_pinned_bytes() { return g_peak_pinned_bytes.load(); }
void reset_peak_pinned_bytes() { g_peak_pinned_bytes.store(g_pinned_bytes.load()); }

}  // namespace ferry::detail
