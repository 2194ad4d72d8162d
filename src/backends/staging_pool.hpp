// The staging pool: staging kits (platform/cuda/staging_kit.hpp) kept for the life of the process and handed
// out again, since pinning costs far more than the copy it serves (a third of the throughput when done inside
// the timed region), all within one budget by the rules of docs/engine.md ("One pinned budget").
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "ferry/status.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/staging_kit.hpp"

namespace ferry::detail {

using Kits = std::vector<std::unique_ptr<StagingKit>>;

/// Which kits a caller wants: for GPU `device` of the driver `api`, with buffers of `buffer_size` bytes.
struct KitShape {
  const CudaApi* api = nullptr;
  int device = -1;
  std::uint64_t buffer_size = 0;
};

class StagingPool {
 public:
  /// `budget`: the most pinned bytes its kits may hold at once; 0 follows the process's pinned_budget.
  explicit StagingPool(std::uint64_t budget = 0) : fixed_budget_(budget) {}

  /// Kits of `shape` with counts[i] buffers each, all at once; the device's context must be current. Without
  /// `when_room`, waits for room in the budget (`waited_ns`, if given, gets how long). With it (a pool worker,
  /// which never waits), returns no kits when there is no room now or others wait first, and `when_room` runs
  /// once, on the thread that gives memory back, when there may be; `owner` says whose wait it is. Errors:
  /// invalid_argument when the kits need more than the whole budget (see kits_that_fit), the driver's.
  Result<Kits> acquire(const KitShape& shape, std::span<const unsigned> counts, std::uint64_t* waited_ns = nullptr,
                       const void* owner = nullptr, const std::function<void()>* when_room = nullptr);
  /// One kit, as above: null where that returns none.
  Result<std::unique_ptr<StagingKit>> acquire(const KitShape& shape, unsigned count, const void* owner = nullptr,
                                              const std::function<void()>* when_room = nullptr);
  /// Whether a caller other than `owner` waits for room: a worker that keeps a kit between takes gives it
  /// back at its next one.
  bool room_wanted_by_other(const void* owner) const {
    const void* first = first_waiter_.load(std::memory_order_relaxed);
    return first != nullptr && first != owner;
  }
  /// Gives a kit back; its stream must be idle (synchronised). `destroy`: frees it instead (destroy_kit), for
  /// a kit whose stream could not be synchronised.
  void release(std::unique_ptr<StagingKit> kit, bool destroy = false);
  /// Makes kits of this shape into the pool, one at a time, until `kits` kits are idle or in use or the budget
  /// is full: a request of that many workers then pins nothing, and workers that start meanwhile take each kit
  /// as it comes. The device's context must be current.
  Status reserve(const KitShape& shape, unsigned count, unsigned kits);
  /// Frees every idle kit (tests use it for leak checks).
  void clear();

  /// The budget in force, in bytes.
  std::uint64_t budget() const;
  /// How many kits of `count` buffers of `buffer_size` the whole budget holds (0: not one).
  std::uint64_t kits_that_fit(std::uint64_t buffer_size, unsigned count) const;

 private:
  struct Waiter;
  // What a caller got: kits taken from the idle ones, how many to make (counts), idle kits to free first.
  struct Grant {
    Kits kits;
    std::vector<unsigned> to_make;
    Kits evicted;
  };

  // Whether the budget has room for what `counts` needs (freeing idle kits of other shapes where that makes
  // room). With `grant`, takes it then; nothing changes otherwise.
  bool grant_locked(const KitShape& shape, std::span<const unsigned> counts, Grant* grant);
  // Takes the idle kit of this shape released last (now in use); null when there is none.
  std::unique_ptr<StagingKit> take_idle_locked(const KitShape& shape, unsigned count);
  // Frees the evicted kits and makes the rest of a grant (outside the lock).
  Result<Kits> complete(const KitShape& shape, Grant grant);
  // After memory came back: serves the callers waiting for room, first come first (fills their grants), and
  // calls back the workers among them, mutex_ released. `lock`: mutex_, where the caller holds it already.
  void room_came(std::unique_lock<std::mutex> lock = {});

  // Makes a kit the budget was charged for (kit_charge), its maker having set making_, and settles the charge
  // and the turn; the kit goes into `in_use` (a caller's kits), or with null into the idle ones.
  Status make_charged(const KitShape& shape, unsigned count, Kits* in_use);

  const std::uint64_t fixed_budget_;
  mutable std::mutex mutex_;  // guards everything below
  bool making_ = false;       // a kit is being made: one at a time (see complete)
  std::condition_variable kit_idle_;  // on mutex_: a kit went idle, or making_ came false
  Kits idle_;                 // oldest first
  unsigned in_use_ = 0;       // kits handed out (once made) or evicted, and not yet released, of any shape
  std::uint64_t held_ = 0;    // pinned bytes of every kit of this pool, plus those charged for kits being made
  std::deque<std::shared_ptr<Waiter>> waiters_;
  std::vector<const void*> passes_;  // workers called back: their next acquire goes first
  std::condition_variable served_;
  std::atomic<const void*> first_waiter_{nullptr};  // waiters_.front()'s owner, read without the lock
};

StagingPool& process_staging_pool();

}  // namespace ferry::detail
