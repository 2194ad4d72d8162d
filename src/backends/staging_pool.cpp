// StagingPool: pinned bounce buffers, streams and events, created once and reused.
#include "backends/staging_pool.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "backends/numa_placement.hpp"
#include "base/fork_guard.hpp"
#include "base/setup_ledger.hpp"
#include "ferry/config.hpp"
#include "platform/cuda/primary_context.hpp"

#include <fmt/format.h>

namespace ferry::detail {
namespace {

constexpr std::size_t kHugePage = 2u << 20;

std::atomic<std::uint64_t> g_pinned_bytes{0};  // every kit's buffers, from creation to destroy_kit
std::atomic<std::uint64_t> g_peak_pinned_bytes{0};
std::atomic<std::uint64_t> g_waits{0}, g_waited_ns{0};

// What a kit takes from the budget before it is made: its buffers on whole huge pages (a kit that ends up
// with cuMemHostAlloc's pages pins less, and gives the difference back once made).
std::uint64_t kit_charge(std::uint64_t buffer_size, unsigned count) {
  return (buffer_size * count + kHugePage - 1) / kHugePage * kHugePage;
}

// Kits that could never fit: a configuration to change, not a wait.
Status too_large(std::uint64_t buffer_size, std::span<const unsigned> counts, std::uint64_t need, std::uint64_t budget) {
  return Status(ErrorCode::invalid_argument,
                fmt::format("{} staging kit(s) of {} pinned buffer(s) of {} need {} at once, more than the whole "
                            "pinned_budget ({}): lower bounce_buffer_size or bounce_buffers_per_thread, or raise "
                            "pinned_budget",
                            counts.size(), counts.empty() ? 0 : counts[0], format_size(buffer_size),
                            format_size(need), format_size(budget)));
}

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

// A new kit: a stream, `count` pinned buffers and their events. Counted nowhere yet.
Result<std::unique_ptr<StagingKit>> StagingPool::make_kit(const CudaApi& api, int device, std::uint64_t buffer_size,
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
  const std::uint64_t now = g_pinned_bytes += kit->pinned_bytes;
  std::uint64_t peak = g_peak_pinned_bytes.load();
  while (now > peak && !g_peak_pinned_bytes.compare_exchange_weak(peak, now)) {
  }
  timer.set(1, kit->pinned_bytes);
  return kit;
}

std::uint64_t StagingPool::budget() const { return fixed_budget_ != 0 ? fixed_budget_ : pinned_budget_in_force(); }

std::uint64_t StagingPool::kits_that_fit(std::uint64_t buffer_size, unsigned count) const {
  return budget() / kit_charge(buffer_size, count);
}

StagingPool::Plan StagingPool::plan_locked(const CudaApi& api, int device, std::uint64_t buffer_size,
                                            std::span<const unsigned> counts) const {
  // Idle kits of the shapes asked for, the kit released last first: taking the oldest instead made every
  // small request meet the kit that had been idle longest, its stream and buffers out of the caches (H200
  // machine, two alternating rounds: 64 KiB reads with 64 in flight from 16 threads 1.03-1.08x, 1 MiB ones
  // from one thread 1.05-1.10x, one 1 MiB read at a time 0.83-0.88x of the time;
  // bench/results/2026-12-03-h200-copy-wait).
  Plan plan;
  auto chosen = [&](std::size_t i) {
    return std::find(plan.taken.begin(), plan.taken.end(), i) != plan.taken.end() ||
           std::find(plan.evicted.begin(), plan.evicted.end(), i) != plan.evicted.end();
  };
  for (unsigned count : counts) {
    std::size_t i = idle_.size();
    while (i-- > 0 && (chosen(i) || !has_shape(*idle_[i], api, device, buffer_size, count))) {
    }
    if (i < idle_.size()) {
      plan.taken.push_back(i);
    } else {
      plan.to_make.push_back(count);
      plan.charge += kit_charge(buffer_size, count);
    }
  }
  // Room for the rest: what the budget has left, then idle kits of other shapes, the oldest first.
  const std::uint64_t limit = budget();
  for (std::size_t i = 0; i < idle_.size() && held_ + plan.charge > limit + plan.freed; ++i) {
    if (chosen(i)) continue;
    plan.evicted.push_back(i);
    plan.freed += idle_[i]->pinned_bytes;
  }
  plan.fits = held_ + plan.charge <= limit + plan.freed;
  return plan;
}

bool StagingPool::grant_locked(const CudaApi& api, int device, std::uint64_t buffer_size,
                               std::span<const unsigned> counts, Grant& grant) {
  Plan plan = plan_locked(api, device, buffer_size, counts);
  if (!plan.fits) return false;
  std::vector<std::pair<std::size_t, bool>> leaving;  // (index, evicted), taken out from the back
  for (std::size_t i : plan.taken) leaving.emplace_back(i, false);
  for (std::size_t i : plan.evicted) leaving.emplace_back(i, true);
  std::sort(leaving.rbegin(), leaving.rend());
  for (const auto& [i, evicted] : leaving) {
    (evicted ? grant.evicted : grant.kits).push_back(std::move(idle_[i]));
    idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  grant.to_make = std::move(plan.to_make);
  // The evicted kits stay counted until complete() has freed them: nobody else may pin into their room first.
  held_ += plan.charge;
  in_use_ += static_cast<unsigned>(grant.kits.size());  // the rest count once made (a warm-up counts on them)
  return true;
}

struct StagingPool::Waiter {
  const void* owner = nullptr;
  const CudaApi* api = nullptr;
  int device = -1;
  std::uint64_t buffer_size = 0;
  std::vector<unsigned> counts;
  std::function<void()> when_room;  // a worker's: called once there may be room, not served
  bool served = false;
  Grant grant;
};

void StagingPool::update_first_waiter_locked() {
  first_waiter_.store(waiters_.empty() ? nullptr : waiters_.front()->owner, std::memory_order_relaxed);
}

std::shared_ptr<StagingPool::Waiter> StagingPool::enqueue_locked(const void* owner, const CudaApi& api, int device,
                                                                std::uint64_t buffer_size,
                                                                std::span<const unsigned> counts) {
  auto w = std::make_shared<Waiter>();
  w->owner = owner != nullptr ? owner : w.get();
  w->api = &api;
  w->device = device;
  w->buffer_size = buffer_size;
  w->counts.assign(counts.begin(), counts.end());
  waiters_.push_back(w);
  update_first_waiter_locked();
  return w;
}

void StagingPool::serve_locked(std::vector<std::function<void()>>& calls) {
  bool served = false;
  while (!waiters_.empty()) {
    Waiter& w = *waiters_.front();
    if (w.when_room) {
      // A worker is called back, not served: it asks again (and its ops wait in their queue meanwhile).
      if (!plan_locked(*w.api, w.device, w.buffer_size, w.counts).fits) break;
      // Its next try_acquire keeps this place in the line, ahead of those who waited behind it.
      if (std::find(passes_.begin(), passes_.end(), w.owner) == passes_.end()) passes_.push_back(w.owner);
      calls.push_back(std::move(w.when_room));
    } else {
      if (!grant_locked(*w.api, w.device, w.buffer_size, w.counts, w.grant)) break;
      w.served = served = true;
    }
    waiters_.pop_front();
  }
  update_first_waiter_locked();
  if (served) served_.notify_all();
}

void StagingPool::room_came() {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    serve_locked(calls);
  }
  for (auto& call : calls) call();
}

Result<Kits> StagingPool::complete(const CudaApi& api, int device, std::uint64_t buffer_size, Grant grant) {
  for (auto& kit : grant.evicted) {
    const std::uint64_t bytes = kit->pinned_bytes;
    destroy_kit(*kit);
    std::lock_guard<std::mutex> lock(mutex_);
    held_ -= bytes;
  }
  Kits kits = std::move(grant.kits);
  // Kits are made one at a time. Measured on the GPU machine (bench/results/2026-11-30-h200-pinning): the
  // 16 workers of a first request pinning their 8 MiB each at once took 40 ms before any of them could
  // start, one after another 31 ms, the first ready after 2 ms: first-touching the memory does not get faster
  // with threads, and the registrations contend. So a worker starts as soon as its own kit is made, while
  // later workers still wait.
  Status failed;
  for (unsigned count : grant.to_make) {
    const std::uint64_t charge = kit_charge(buffer_size, count);
    Result<std::unique_ptr<StagingKit>> made = Status(ErrorCode::internal, "not made: an earlier kit failed");
    if (failed.ok()) {
      std::lock_guard<std::mutex> making(making_mutex_);
      std::unique_ptr<StagingKit> idle;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        idle = take_idle_locked(api, device, buffer_size, count);
        if (idle) held_ -= charge;  // a warm-up made one meanwhile: its bytes are counted already
      }
      if (idle) {
        kits.push_back(std::move(idle));
        continue;
      }
      made = make_kit(api, device, buffer_size, count);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (made.ok()) {
      held_ = held_ - charge + (*made)->pinned_bytes;  // a kit off huge pages pins less than it was charged
      ++in_use_;
      kits.push_back(std::move(*made));
    } else {
      if (failed.ok()) failed = made.status();
      held_ -= charge;
    }
  }
  if (!failed.ok()) {
    for (auto& kit : kits) release(std::move(kit));  // good kits, back for others
    room_came();
    return failed;
  }
  if (!grant.evicted.empty() || !grant.to_make.empty()) room_came();  // a made kit may have pinned less
  return kits;
}

Result<Kits> StagingPool::acquire(const CudaApi& api, int device, std::uint64_t buffer_size,
                                  std::span<const unsigned> counts, std::uint64_t* waited_ns) {
  if (waited_ns) *waited_ns = 0;
  std::uint64_t need = 0;
  for (unsigned count : counts) need += kit_charge(buffer_size, count);
  const std::uint64_t limit = budget();
  if (need > limit) return too_large(buffer_size, counts, need, limit);
  Grant grant;
  std::unique_lock<std::mutex> lock(mutex_);
  if (!waiters_.empty() || !grant_locked(api, device, buffer_size, counts, grant)) {
    // Wait in turn. A budget raised meanwhile (ferry.config) is seen at the next look, within 50 ms.
    auto w = enqueue_locked(nullptr, api, device, buffer_size, counts);
    const auto started = std::chrono::steady_clock::now();
    while (!w->served) {
      served_.wait_for(lock, std::chrono::milliseconds(50));
      if (!w->served && waiters_.front() == w) {
        std::vector<std::function<void()>> calls;
        serve_locked(calls);
        if (!calls.empty()) {
          lock.unlock();
          for (auto& call : calls) call();
          lock.lock();
        }
      }
    }
    grant = std::move(w->grant);
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started);
    if (waited_ns) *waited_ns = static_cast<std::uint64_t>(waited.count());
    g_waits.fetch_add(1);
    g_waited_ns.fetch_add(static_cast<std::uint64_t>(waited.count()));
  }
  lock.unlock();
  return complete(api, device, buffer_size, std::move(grant));
}

std::unique_ptr<StagingKit> StagingPool::take_idle_locked(const CudaApi& api, int device,
                                                                 std::uint64_t buffer_size, unsigned count) {
  for (std::size_t i = idle_.size(); i-- > 0;) {
    if (!has_shape(*idle_[i], api, device, buffer_size, count)) continue;
    auto kit = std::move(idle_[i]);
    idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
    ++in_use_;
    return kit;
  }
  return nullptr;
}

Result<std::unique_ptr<StagingKit>> StagingPool::acquire(const CudaApi& api, int device, std::uint64_t buffer_size,
                                                         unsigned count) {
  {
    // The common case, a kit of this shape idle and nobody waiting, costs what it did before the budget.
    std::lock_guard<std::mutex> lock(mutex_);
    if (waiters_.empty()) {
      if (auto kit = take_idle_locked(api, device, buffer_size, count)) return kit;
    }
  }
  FERRY_ASSIGN_OR_RETURN(Kits kits, acquire(api, device, buffer_size, std::span<const unsigned>(&count, 1)));
  return std::move(kits.front());
}

Result<std::unique_ptr<StagingKit>> StagingPool::try_acquire(const CudaApi& api, int device, std::uint64_t buffer_size,
                                                             unsigned count, const void* owner,
                                                             const std::function<void()>& when_room) {
  const std::span<const unsigned> counts(&count, 1);
  Grant grant;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto pass = passes_.empty() ? passes_.end() : std::find(passes_.begin(), passes_.end(), owner);
    const bool first = waiters_.empty() || pass != passes_.end();
    if (pass != passes_.end()) passes_.erase(pass);
    if (first) {
      if (auto kit = take_idle_locked(api, device, buffer_size, count)) return kit;
    }
    if (!first || !grant_locked(api, device, buffer_size, counts, grant)) {
      if (const std::uint64_t limit = budget(); kit_charge(buffer_size, count) > limit) {
        return too_large(buffer_size, counts, kit_charge(buffer_size, count), limit);
      }
      enqueue_locked(owner, api, device, buffer_size, counts)->when_room = when_room;
      g_waits.fetch_add(1);
      return std::unique_ptr<StagingKit>();
    }
  }
  // Granted: made outside the lock.
  FERRY_ASSIGN_OR_RETURN(Kits kits, complete(api, device, buffer_size, std::move(grant)));
  return std::move(kits.front());
}

bool StagingPool::holds_locked(const CudaApi& api, int device, std::uint64_t buffer_size, unsigned count,
                               unsigned kits) {
  const auto idle = std::count_if(idle_.begin(), idle_.end(),
                                  [&](const auto& k) { return has_shape(*k, api, device, buffer_size, count); });
  return static_cast<unsigned>(idle) + in_use_ >= kits;
}

Status StagingPool::reserve(const CudaApi& api, int device, std::uint64_t buffer_size, unsigned count,
                            unsigned kits) {
  const std::uint64_t charge = kit_charge(buffer_size, count);
  for (;;) {
    std::lock_guard<std::mutex> making(making_mutex_);
    {
      // Only into free room: a warm-up frees nothing and waits for nothing.
      std::lock_guard<std::mutex> lock(mutex_);
      if (holds_locked(api, device, buffer_size, count, kits) || !waiters_.empty() || held_ + charge > budget()) {
        return Status();
      }
      held_ += charge;
    }
    auto made = make_kit(api, device, buffer_size, count);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!made.ok()) {
      held_ -= charge;
      return made.status();
    }
    held_ = held_ - charge + (*made)->pinned_bytes;
    idle_.push_back(std::move(*made));
  }
}

void StagingPool::release(std::unique_ptr<StagingKit> kit) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --in_use_;
    idle_.push_back(std::move(kit));
    if (waiters_.empty()) return;
  }
  room_came();
}

void StagingPool::discard(std::unique_ptr<StagingKit> kit) {
  const std::uint64_t bytes = kit->pinned_bytes;
  destroy_kit(*kit);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --in_use_;
    held_ -= bytes;
    if (waiters_.empty()) return;
  }
  room_came();
}

void StagingPool::clear() {
  Kits idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle.swap(idle_);
    for (const auto& k : idle) held_ -= k->pinned_bytes;
  }
  for (auto& k : idle) destroy_kit(*k);
  room_came();
}

std::uint64_t StagingPool::pinned_bytes() { return g_pinned_bytes.load(); }
std::uint64_t StagingPool::peak_pinned_bytes() { return g_peak_pinned_bytes.load(); }
void StagingPool::reset_peak_pinned_bytes() { g_peak_pinned_bytes.store(g_pinned_bytes.load()); }
std::uint64_t StagingPool::waits() { return g_waits.load(); }
std::uint64_t StagingPool::waited_ns() { return g_waited_ns.load(); }

StagingPool& process_staging_pool() {
  // Leaked on purpose: freeing pinned memory during static destruction races the driver's own teardown.
  static constinit std::atomic<StagingPool*> pool{nullptr};
  return made_once(pool, [] { return new StagingPool(); });
}

}  // namespace ferry::detail

namespace ferry {

PinnedMemoryUse pinned_memory_use() {
  using detail::StagingPool;
  PinnedMemoryUse use;
  use.budget = detail::process_staging_pool().budget();
  use.pinned_bytes = StagingPool::pinned_bytes();
  use.peak_bytes = StagingPool::peak_pinned_bytes();
  use.waits = StagingPool::waits();
  use.waited_seconds = static_cast<double>(StagingPool::waited_ns()) / 1e9;
  return use;
}

}  // namespace ferry
