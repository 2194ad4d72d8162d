// The engine's one way to take work: every request's tasks become ops on an OpQueue, and pool workers drain
// it a take at a time, in the order the ops came (docs/engine.md, "One queue per file, route and GPU").
// Thread safety: all members may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/route_backend.hpp"
#include "base/spinning_mutex.hpp"

namespace ferry::detail {

class RequestState;

class OpQueue : public std::enable_shared_from_this<OpQueue> {
 public:
  /// `limit`: how many workers may drain the queue at once.
  explicit OpQueue(unsigned limit) : limit_(limit == 0 ? 1 : limit) {}

  // An op waiting, as the queue keeps it.
  struct Queued {
    Op op;
    RequestState* request;  // alive until its last op retires; null once its waiter took it (withdraw)
    bool claimed = false;   // taken before and put back (no room for a worker): claimed already
    std::chrono::steady_clock::time_point put_back{};  // when it was put back, or never
  };
  // A push not yet moved into queued_: pushes go onto a lock-free stack (newest first), so that a thread
  // pushing small reads never waits for the drainers' lock; whoever takes mutex_ moves them over first. A
  // request holds its own (RequestState::push_node), so that no drainer frees a block the pusher made.
  struct PushNode {
    PushNode* next = nullptr;
    Queued first{};            // a push has one op at least
    std::vector<Queued> more;  // the other ops of a request of several
  };

  /// Queues `request`'s ops (each a task of it, on `route`, its backend) and starts workers as the queue
  /// needs them. With a `grace` period, a worker started now waits that long before it drains (the request's
  /// waiter may run it first): its pool ticket is returned, else 0.
  std::uint64_t push(RequestState& request, RouteBackend& route, std::span<const Task> tasks,
                     std::chrono::microseconds grace);
  /// After the waiter of a one-op request claimed it (RequestState::run_here_if_unclaimed): forgets its op
  /// and withdraws the worker started for it with `ticket` if none has begun (another starts if ops wait).
  void withdraw(const RequestState& request, std::uint64_t ticket);
  /// Starts the drainers the ops waiting want: the pinned budget may have room again, or a request whose
  /// ops wait for it was stopped (its ops are dropped at once, not when room comes).
  void restart();

 private:
  using Clock = std::chrono::steady_clock;
  // Ops taken together, and what became of them.
  struct Take {
    std::vector<Op> ops;
    std::vector<RequestState*> requests;
    std::vector<Result<std::uint64_t>> results;
    std::vector<Report> reports;  // one for all (one request), or one per op (gathered from several)
    std::uint64_t fill = 0;       // RouteWorker::last_fill() after it ran
    std::vector<std::pair<std::size_t, Clock::time_point>> waited;  // ops put back before: (index, since when)
    std::vector<std::pair<RequestState*, std::size_t>> dropped;  // ops of stopped requests passed over
    Clock::time_point started;

    // Forgets the ops taken (their requests had them back), keeping the memory.
    void clear() {
      ops.clear();
      requests.clear();
      waited.clear();
    }
  };

  void drain();
  // Takes the next ops into `take` (and drops those of stopped requests on the way); false when none wait
  // (with `stop_if_empty`, the drainer is then counted out). `busy`: whether the drainer is running a take
  // (counted in busy_), kept up to date.
  bool take_next(Take& take, bool& busy, bool stop_if_empty);
  // take_next()'s take from queued_ (mutex_ held): into `take` the ops it takes, and the stopped ones it drops.
  void take_locked(Take& take);
  // Runs `take` on `worker` (made on first need). False, and nothing ran, when the pinned budget had no room
  // for a worker (restart() follows).
  bool run(Take& take, std::unique_ptr<RouteWorker>& worker);
  // Puts a take that could not run back at the front, and moves the queue's ops of stopped requests to
  // take.dropped. False when the drainer is counted out (restart() will start another), true when room came
  // meanwhile and it should look again.
  bool put_back(Take& take, std::uint64_t room_generation);
  static void retire(Take& take, const Status& failed);
  // Retires every take of `pending` (oldest first) and keeps them in `spare` for their memory.
  static void retire_all(std::deque<Take>& pending, const Status& failed, std::vector<Take>& spare);
  // Whether `take` is one op that fills a bounce buffer (a large read's task): its copy is long, and the worker
  // reads the next op meanwhile rather than wait for it (16 MiB reads in flight at 0.92-0.95 of the copy
  // ceiling).
  static bool lone_fill(const Take& take);
  // Stays (kLinger at most) until ops wait, if the last two pushes came from one thread, no other drainer stays
  // and a core is left for it: still counted in draining_ and not busy, it takes what is pushed meanwhile.
  void linger();
  // Whether retiring `take` would end one of its requests (no other op of it left).
  static bool ends_requests(const Take& take);
  // Moves the pushes of the stack into queued_, oldest first (mutex_ held).
  void take_pushed_locked();
  // Whether ops wait, in queued_ or pushed (a hint: read without the lock).
  bool ops_waiting() const;
  // Whether the drainers counted now will take a one-op push without one more started: they all run, or those
  // between takes (every one, busy or not, for small ops from memory: `each` above 1), `each` ops to a drainer,
  // are enough for what waits. Called after the push is on the stack
  // (take_next() says why no op is then left without a drainer).
  bool drainers_will_take(std::size_t each) const;
  // Starts `n` more drainers (mutex_ not held).
  std::uint64_t start_drainers(unsigned n, std::chrono::microseconds grace);
  // How many ops a take that begins with `front` holds, with `waiting` ops shared among `free` drainers.
  std::size_t take_size_locked(const Queued& front, std::size_t waiting, unsigned free) const;
  // How many more drainers the ops waiting want (counted in draining_ already): one a take, small ops from
  // memory at least a few a drainer, none beyond the drainers free to take them or beyond the limit.
  unsigned more_wanted_locked();

  const unsigned limit_;
  // What the pinned budget calls when it may have room: restart(), if the queue still exists then.
  std::once_flag restart_call_made_;
  std::function<void()> restart_call_;
  // Each group below on a cache line of its own: the drainers' lock, the counts they change and push() reads, the
  // stack both change, and what only the pushing thread writes.
  alignas(64) SpinningMutex mutex_;
  // Guarded by mutex_: the ops waiting, from head_ on (the vector keeps its memory as ops come and go).
  std::vector<Queued> queued_;
  std::size_t head_ = 0;
  // Changed under mutex_, read without it by push(): drainer jobs running or in the pool's queue, and of those
  // the ones running a take.
  alignas(64) std::atomic<unsigned> draining_{0};
  std::atomic<unsigned> busy_{0};
  std::atomic<std::size_t> waiting_{0};  // queued_.size() - head_, read without the lock (a hint)
  std::atomic<std::uint64_t> room_generation_{0};  // restart() calls so far
  std::atomic<bool> lingering_{false};  // a drainer lingers (linger())
  alignas(64) std::atomic<PushNode*> pushed_{nullptr};  // the pushes not yet in queued_, newest first
  std::atomic<std::size_t> pushed_ops_{0};  // their ops (a hint: counted before a push, uncounted once moved)
  // The thread of the newest push, and whether the one before came from it too (one thread keeps reads in
  // flight: linger() stays for it).
  alignas(64) std::atomic<std::thread::id> last_pusher_{};
  std::atomic<bool> one_pusher_{false};
};

}  // namespace ferry::detail
