// StagingPool: pinned bounce buffers, streams and events, created once and reused.
#include "backends/staging_pool.hpp"

#include <algorithm>
#include <chrono>

#include "base/fork_guard.hpp"
#include "base/timing.hpp"
#include "ferry/config.hpp"

#include <fmt/format.h>

namespace ferry::detail {
namespace {

std::atomic<std::uint64_t> g_waits{0}, g_waited_ns{0};

// Kits that could never fit: a configuration to change, not a wait.
Status too_large(std::uint64_t buffer_size, std::span<const unsigned> counts, std::uint64_t need, std::uint64_t budget) {
  return Status(ErrorCode::invalid_argument,
                fmt::format("{} staging kit(s) of {} pinned buffer(s) of {} need {} at once, more than the whole "
                            "pinned_budget ({}): lower bounce_buffer_size or bounce_buffers_per_thread, or raise "
                            "pinned_budget",
                            counts.size(), counts.empty() ? 0 : counts[0], format_size(buffer_size),
                            format_size(need), format_size(budget)));
}

bool has_shape(const StagingKit& k, const KitShape& shape, unsigned count) {
  return k.api == shape.api && k.device == shape.device && k.buffer_size == shape.buffer_size &&
         k.buffers.size() == count;
}

}  // namespace

std::uint64_t StagingPool::budget() const { return fixed_budget_ != 0 ? fixed_budget_ : pinned_budget_in_force(); }

std::uint64_t StagingPool::kits_that_fit(std::uint64_t buffer_size, unsigned count) const {
  return budget() / kit_charge(buffer_size, count);
}

bool StagingPool::grant_locked(const KitShape& shape, std::span<const unsigned> counts, Grant* grant) {
  // Idle kits of the shapes asked for, the kit released last first: the oldest, its stream and buffers out of
  // the caches, made small requests up to 1.2x slower (bench/results/2026-12-03-h200-copy-wait).
  enum Role : char { kStays, kTaken, kEvicted };
  std::vector<Role> roles(idle_.size(), kStays);  // of each idle kit
  std::vector<unsigned> to_make;
  std::uint64_t charge = 0, freed = 0;
  for (unsigned count : counts) {
    std::size_t i = idle_.size();
    while (i-- > 0 && (roles[i] != kStays || !has_shape(*idle_[i], shape, count))) {
    }
    if (i < idle_.size()) {
      roles[i] = kTaken;
    } else {
      to_make.push_back(count);
      charge += kit_charge(shape.buffer_size, count);
    }
  }
  // Room for the rest: what the budget has left, then idle kits of other shapes, the oldest first.
  const std::uint64_t limit = budget();
  for (std::size_t i = 0; i < idle_.size() && held_ + charge > limit + freed; ++i) {
    if (roles[i] != kStays) continue;
    roles[i] = kEvicted;
    freed += idle_[i]->pinned_bytes;
  }
  if (held_ + charge > limit + freed) return false;
  if (grant == nullptr) return true;
  for (std::size_t i = idle_.size(); i-- > 0;) {  // from the back, so that the indices still hold
    if (roles[i] == kStays) continue;
    (roles[i] == kEvicted ? grant->evicted : grant->kits).push_back(std::move(idle_[i]));
    idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  grant->to_make = std::move(to_make);
  // The evicted kits count as in use until complete() has freed them (release): nobody else may pin into their
  // room first. The kits to make count once made (a warm-up counts on them).
  held_ += charge;
  in_use_ += static_cast<unsigned>(grant->kits.size() + grant->evicted.size());
  return true;
}

struct StagingPool::Waiter {
  const void* owner = nullptr;
  KitShape shape;
  std::vector<unsigned> counts;
  std::function<void()> when_room;  // a worker's: called once there may be room, not served
  bool served = false;
  Grant grant;
};

void StagingPool::room_came(std::unique_lock<std::mutex> lock) {
  if (!lock) lock = std::unique_lock<std::mutex>(mutex_);
  if (waiters_.empty()) return;
  std::vector<std::function<void()>> calls;
  bool served = false;
  while (!waiters_.empty()) {
    Waiter& w = *waiters_.front();
    // A worker is called back, not served: it asks again (and its ops wait in their queue meanwhile).
    if (!grant_locked(w.shape, w.counts, w.when_room ? nullptr : &w.grant)) break;
    if (w.when_room) {
      // Its next acquire keeps this place in the line, ahead of those who waited behind it.
      if (std::find(passes_.begin(), passes_.end(), w.owner) == passes_.end()) passes_.push_back(w.owner);
      calls.push_back(std::move(w.when_room));
    } else {
      w.served = served = true;
    }
    waiters_.pop_front();
  }
  first_waiter_.store(waiters_.empty() ? nullptr : waiters_.front()->owner, std::memory_order_relaxed);
  if (served) served_.notify_all();
  lock.unlock();
  for (auto& call : calls) call();
}

Result<Kits> StagingPool::complete(const KitShape& shape, Grant grant) {
  for (auto& kit : grant.evicted) release(std::move(kit), /*destroy=*/true);
  Kits kits = std::move(grant.kits);
  // Kits are made one at a time, so that a worker starts as soon as its own is made: pinning does not get
  // faster with threads (16 kits at once: 40 ms before any worker started; one after another: the first
  // after 2 ms, all after 31; bench/results/2026-11-30-h200-pinning).
  Status failed;
  for (unsigned count : grant.to_make) {
    // While another caller makes its kit, this one waits for its turn, or takes a kit released or made for the
    // pool meanwhile (its bytes are counted already): waiting for the turn alone held workers up to 5.6 ms
    // while kits went idle (bench/results/2026-12-06-h100-kit-timeline).
    std::unique_lock<std::mutex> lock(mutex_);
    std::unique_ptr<StagingKit> idle;
    while (failed.ok() && !(idle = take_idle_locked(shape, count)) && making_) kit_idle_.wait(lock);
    if (failed.ok() && !idle) {
      making_ = true;
      lock.unlock();
      failed = make_charged(shape, count, &kits);
      continue;
    }
    held_ -= kit_charge(shape.buffer_size, count);  // taken instead, or not made (an earlier kit failed)
    if (idle) kits.push_back(std::move(idle));
  }
  if (!failed.ok()) {
    for (auto& kit : kits) release(std::move(kit));  // good kits, back for others
  }
  if (!grant.evicted.empty() || !grant.to_make.empty()) room_came();  // a made kit may have pinned less
  if (!failed.ok()) return failed;
  return kits;
}

Result<Kits> StagingPool::acquire(const KitShape& shape, std::span<const unsigned> counts, std::uint64_t* waited_ns,
                                  const void* owner, const std::function<void()>* when_room) {
  if (waited_ns) *waited_ns = 0;
  Grant grant;
  std::unique_lock<std::mutex> lock(mutex_);
  const auto pass = std::find(passes_.begin(), passes_.end(), owner);
  const bool first = waiters_.empty() || pass != passes_.end();
  if (pass != passes_.end()) passes_.erase(pass);
  if (first && counts.size() == 1) {
    // The common case, a kit of this shape idle and nobody waiting, costs what it did before the budget.
    if (auto kit = take_idle_locked(shape, counts[0])) grant.kits.push_back(std::move(kit));
  }
  if (grant.kits.empty() && (!first || !grant_locked(shape, counts, &grant))) {
    std::uint64_t need = 0;
    for (unsigned count : counts) need += kit_charge(shape.buffer_size, count);
    if (const std::uint64_t limit = budget(); need > limit) return too_large(shape.buffer_size, counts, need, limit);
    auto w = std::make_shared<Waiter>(
        Waiter{owner, shape, {counts.begin(), counts.end()}, when_room ? *when_room : std::function<void()>()});
    if (owner == nullptr) w->owner = w.get();  // a caller that waits is its own owner
    waiters_.push_back(w);
    first_waiter_.store(waiters_.front()->owner, std::memory_order_relaxed);
    g_waits.fetch_add(1);
    if (when_room != nullptr) return Kits();
    // Wait in turn. A budget raised meanwhile (ferry.config) is seen at the next look, within 50 ms.
    const std::uint64_t started = now_ns();
    while (!w->served) {
      served_.wait_for(lock, std::chrono::milliseconds(50));
      if (!w->served && waiters_.front() == w) {
        room_came(std::move(lock));
        lock = std::unique_lock<std::mutex>(mutex_);
      }
    }
    grant = std::move(w->grant);
    const std::uint64_t waited = now_ns() - started;
    if (waited_ns) *waited_ns = waited;
    g_waited_ns.fetch_add(waited);
  }
  lock.unlock();
  return complete(shape, std::move(grant));
}

Result<std::unique_ptr<StagingKit>> StagingPool::acquire(const KitShape& shape, unsigned count, const void* owner,
                                                         const std::function<void()>* when_room) {
  FERRY_ASSIGN_OR_RETURN(Kits kits, acquire(shape, std::span<const unsigned>(&count, 1), nullptr, owner, when_room));
  if (kits.empty()) return std::unique_ptr<StagingKit>();  // queued: when_room runs later
  return std::move(kits.front());
}

std::unique_ptr<StagingKit> StagingPool::take_idle_locked(const KitShape& shape, unsigned count) {
  for (std::size_t i = idle_.size(); i-- > 0;) {
    if (!has_shape(*idle_[i], shape, count)) continue;
    auto kit = std::move(idle_[i]);
    idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
    ++in_use_;
    return kit;
  }
  return nullptr;
}

Status StagingPool::make_charged(const KitShape& shape, unsigned count, Kits* in_use) {
  auto made = make_kit(*shape.api, shape.device, shape.buffer_size, count);
  std::lock_guard<std::mutex> lock(mutex_);
  making_ = false;
  kit_idle_.notify_all();  // the next in turn may make its own (or take this one, made for the pool)
  held_ -= kit_charge(shape.buffer_size, count);
  if (!made.ok()) return made.status();
  held_ += (*made)->pinned_bytes;  // a kit off huge pages pins less than it was charged
  if (in_use == nullptr) {
    idle_.push_back(std::move(*made));
  } else {
    ++in_use_;
    in_use->push_back(std::move(*made));
  }
  return Status();
}

Status StagingPool::reserve(const KitShape& shape, unsigned count, unsigned kits) {
  const std::uint64_t charge = kit_charge(shape.buffer_size, count);
  for (;;) {
    {
      // Only into free room: a warm-up frees nothing and waits for nothing but its turn to make a kit. Every kit
      // in use (of any shape) counts as one of the `kits`.
      std::unique_lock<std::mutex> lock(mutex_);
      kit_idle_.wait(lock, [&] { return !making_; });
      const auto idle =
          std::count_if(idle_.begin(), idle_.end(), [&](const auto& k) { return has_shape(*k, shape, count); });
      if (static_cast<unsigned>(idle) + in_use_ >= kits || !waiters_.empty() || held_ + charge > budget()) {
        return Status();
      }
      held_ += charge;
      making_ = true;
    }
    FERRY_RETURN_IF_ERROR(make_charged(shape, count, nullptr));
  }
}

void StagingPool::release(std::unique_ptr<StagingKit> kit, bool destroy) {
  const std::uint64_t bytes = kit->pinned_bytes;
  if (destroy) destroy_kit(*kit);
  std::unique_lock<std::mutex> lock(mutex_);
  --in_use_;
  if (destroy) {
    held_ -= bytes;
  } else {
    idle_.push_back(std::move(kit));
  }
  kit_idle_.notify_all();
  room_came(std::move(lock));
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

StagingPool& process_staging_pool() {
  // Leaked on purpose: freeing pinned memory during static destruction races the driver's own teardown.
  static constinit std::atomic<StagingPool*> pool{nullptr};
  return made_once(pool, [] { return new StagingPool(); });
}

}  // namespace ferry::detail

namespace ferry {

PinnedMemoryUse pinned_memory_use() {
  PinnedMemoryUse use;
  use.budget = detail::process_staging_pool().budget();
  use.pinned_bytes = detail::kit_pinned_bytes();
  use.peak_bytes = detail::peak_kit_pinned_bytes();
  use.waits = detail::g_waits.load();
  use.waited_seconds = static_cast<double>(detail::g_waited_ns.load()) / 1e9;
  return use;
}

}  // namespace ferry
