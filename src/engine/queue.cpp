// OpQueue: ops in the order they came, drained by pool workers a take at a time, retired as they land.
#include "engine/queue.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "backends/staging_pool.hpp"
#include "base/process_limits.hpp"
#include "engine/request.hpp"
#include "engine/thread_pool.hpp"
#include "platform/nvtx/nvtx.hpp"

namespace ferry::detail {
namespace {

// Small ops that come from memory (RouteBackend::from_memory) share a drainer, this many to one: one drainer for
// a few small reads saves the wakes, more keep every core reading when many are in flight.
constexpr std::size_t kSmallOpsPerDrainer = 4;

// How long the last drainer to find the queue empty stays for more ops before it leaves (linger(); docs/engine.md,
// "Fewer wakes": one thread submitting small reads in flight started a drainer for nearly every read).
constexpr std::chrono::microseconds kLinger{50};

}  // namespace

std::uint64_t OpQueue::push(RequestState& request, RouteBackend& route, std::span<const Task> tasks,
                            std::chrono::microseconds grace) {
  // The request's own node: nothing here is freed by a drainer. It is moved into queued_ before any of its ops
  // can retire (a waiter that runs its one op withdraws it first), so the request outlives its use.
  PushNode* pushed = &request.push_node();
  pushed->first = Queued{Op{tasks[0], &route}, &request};
  pushed->more.reserve(tasks.size() - 1);
  for (const Task& t : tasks.subspan(1)) pushed->more.push_back(Queued{Op{t, &route}, &request});
  // Asked before the push: once it is on the stack, a drainer may run and retire it, and the request's
  // completion lets go of `route`.
  const std::size_t each = route.from_memory(tasks[0]) ? kSmallOpsPerDrainer : 1;
  pushed_ops_.fetch_add(tasks.size(), std::memory_order_relaxed);  // before the push: never below 0
  // Sequentially consistent, as the drainer count read after it: see drainers_will_take().
  PushNode* head = pushed_.load(std::memory_order_relaxed);
  do {
    pushed->next = head;
  } while (!pushed_.compare_exchange_weak(head, pushed));  // from here on a drainer may take (and free) it
  const std::thread::id me = std::this_thread::get_id();
  if (last_pusher_.load(std::memory_order_relaxed) != me) {
    last_pusher_.store(me, std::memory_order_relaxed);
    one_pusher_.store(false, std::memory_order_relaxed);
  } else if (!one_pusher_.load(std::memory_order_relaxed)) {
    one_pusher_.store(true, std::memory_order_relaxed);
  }
  if (tasks.size() == 1 && drainers_will_take(each)) return 0;
  unsigned start = 0;
  bool idle = false;
  {
    std::lock_guard<SpinningMutex> lock(mutex_);
    idle = draining_ == 0;
    start = more_wanted_locked();
  }
  if (start == 0) return 0;
  // Only a queue with no drainer waits for a one-op request's waiter: with drainers at work, its op is theirs.
  return start_drainers(start, start == 1 && idle ? grace : std::chrono::microseconds(0));
}

bool OpQueue::drainers_will_take(std::size_t each) const {
  const unsigned draining = draining_.load();
  if (draining == 0) return false;
  if (draining >= limit_) return true;
  // Small ops from memory: a busy drainer is back for them within a read or two, so it counts as a taker too, and
  // the submitting thread wakes another only once more than `each` wait for every one (this push and those
  // still on the stack counted: a busy drainer's count of the queue is as old as its take). Otherwise only the
  // drainers between takes count, busy_ read after the push, as take_next() needs.
  const unsigned takers = each > 1 ? draining : draining - std::min(draining, busy_.load());
  return waiting_.load(std::memory_order_relaxed) + pushed_ops_.load(std::memory_order_relaxed) <= takers * each;
}

void OpQueue::take_pushed_locked() {
  PushNode* p = pushed_.exchange(nullptr);
  if (p == nullptr) return;
  PushNode* oldest = nullptr;  // the stack is newest first: reversed
  while (p != nullptr) oldest = std::exchange(p, std::exchange(p->next, oldest));
  const std::size_t queued_before = queued_.size();
  for (; oldest != nullptr; oldest = oldest->next) {
    queued_.push_back(oldest->first);
    for (Queued& q : oldest->more) queued_.push_back(q);
  }
  pushed_ops_.fetch_sub(queued_.size() - queued_before, std::memory_order_relaxed);
}

bool OpQueue::ops_waiting() const {
  return waiting_.load(std::memory_order_relaxed) != 0 || pushed_.load(std::memory_order_relaxed) != nullptr;
}

void OpQueue::withdraw(const RequestState& request, std::uint64_t ticket) {
  {
    std::lock_guard<SpinningMutex> lock(mutex_);
    take_pushed_locked();
    // From the back: the op withdrawn is most often the newest.
    for (std::size_t i = queued_.size(); i > head_; --i) {
      if (queued_[i - 1].request == &request) {
        queued_[i - 1].request = nullptr;
        break;
      }
    }
  }
  if (ticket == 0 || !shared_pool().withdraw(ticket)) return;
  unsigned start = 0;
  {
    std::lock_guard<SpinningMutex> lock(mutex_);
    --draining_;
    start = more_wanted_locked();
  }
  if (start > 0) start_drainers(start, std::chrono::microseconds(0));
}

std::size_t OpQueue::take_size_locked(const Queued& front, std::size_t waiting, unsigned free) const {
  const RouteBackend& route = *front.op.request;
  const std::uint64_t fill = route.fill_bytes();
  if (fill == 0) return route.ops_together();
  // A request of several ops: its share of every drainer, whenever they come (a share of what waits made
  // whole-fill takes on half the drainers when two batches were queued). Requests of one op: a share of the
  // ops waiting among the drainers free now.
  const std::size_t ops = front.request->ops();
  const std::size_t share = ops > 1 ? (ops + limit_ - 1) / limit_ : (waiting + free - 1) / free;
  const std::size_t fits =
      static_cast<std::size_t>(std::max<std::uint64_t>(1, fill / std::max<std::uint64_t>(1, front.op.task.length)));
  return std::max(route.ops_together(), std::min(share, fits));
}

unsigned OpQueue::more_wanted_locked() {
  take_pushed_locked();
  while (head_ < queued_.size() && queued_[head_].request == nullptr) ++head_;  // ops their waiters took
  const std::size_t waiting = queued_.size() - head_;
  waiting_.store(waiting, std::memory_order_relaxed);
  if (waiting == 0 || draining_ >= limit_) return 0;
  const Queued& front = queued_[head_];
  const bool quick = front.op.request->from_memory(front.op.task);
  const std::size_t each = std::max(take_size_locked(front, waiting, limit_), quick ? kSmallOpsPerDrainer : std::size_t{1});
  const std::size_t needed = std::min<std::size_t>(limit_, (waiting + each - 1) / each);
  const std::size_t free = draining_ - busy_;
  if (needed <= free) return 0;
  const auto start = static_cast<unsigned>(std::min<std::size_t>(needed - free, limit_ - draining_));
  draining_ += start;
  return start;
}

std::uint64_t OpQueue::start_drainers(unsigned n, std::chrono::microseconds grace) {
  auto drain = [](void* queue) { static_cast<OpQueue*>(queue)->drain(); };
  std::uint64_t ticket = 0;
  for (unsigned i = 0; i < n; ++i) ticket = shared_pool().submit(PoolJob(drain, shared_from_this()), limit_, grace);
  return ticket;
}

bool OpQueue::take_next(Take& take, bool& busy, bool stop_if_empty) {
  unsigned helpers = 0;
  {
    std::lock_guard<SpinningMutex> lock(mutex_);
    if (busy) --busy_;
    busy = false;
    for (;;) {
      take_pushed_locked();
      take_locked(take);
      if (!take.ops.empty()) {
        busy = true;
        ++busy_;
        // A push that still counted this drainer free (before the line above) took no lock and left its op to
        // it; this take may not hold that op. What waits now gets the drainers it wants (the push reads busy_
        // after its op is on the stack, this reads the stack after busy_: both sequentially consistent, so one
        // of them sees the other). Without this, reads that wait for one another hung with an op left behind.
        helpers = more_wanted_locked();
        break;
      }
      if (!take.dropped.empty()) return true;
      if (!stop_if_empty) return false;
      --draining_;
      // A push that still counted this drainer (before the line above) took no lock, and its op is on the stack
      // now (both sequentially consistent): this drainer stays for it.
      if (pushed_.load() == nullptr) return false;
      ++draining_;
    }
  }
  if (helpers > 0) start_drainers(helpers, std::chrono::microseconds(0));
  return true;
}

void OpQueue::take_locked(Take& take) {
  // Ops whose one-op request its waiter runs itself are passed over; ops of stopped requests are dropped
  // (retired unrun), however many.
  const std::size_t waiting = queued_.size() - head_;
  const unsigned free = std::max(1u, draining_ - busy_);
  std::size_t size = 1;
  std::uint64_t fill = 0, bytes = 0;
  while (head_ < queued_.size() && take.ops.size() < size) {
    const Queued& q = queued_[head_];
    if (q.request != nullptr && q.request->stop_requested()) {
      if (take.dropped.empty() || take.dropped.back().first != q.request) take.dropped.emplace_back(q.request, 0);
      ++take.dropped.back().second;
      ++head_;
      continue;
    }
    if (!take.ops.empty() && fill != 0 && bytes + q.op.task.length > fill) break;
    ++head_;
    if (q.request == nullptr || (!q.claimed && !q.request->claim())) continue;
    if (take.ops.empty()) {
      fill = q.op.request->fill_bytes();
      size = take_size_locked(q, waiting, free);
    }
    take.ops.push_back(q.op);
    take.requests.push_back(q.request);
    if (q.put_back != Clock::time_point{}) take.waited.emplace_back(take.ops.size() - 1, q.put_back);
    bytes += q.op.task.length;
  }
  if (head_ == queued_.size()) {  // the usual case: drained to the end, the memory kept
    queued_.clear();
    head_ = 0;
  } else if (head_ >= 1024 && head_ * 2 >= queued_.size()) {  // never empty: drop the front half
    queued_.erase(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  waiting_.store(queued_.size() - head_, std::memory_order_relaxed);
}

bool OpQueue::run(Take& take, std::unique_ptr<RouteWorker>& worker) {
  const std::size_t n = take.ops.size();
  take.started = Clock::now();
  take.results.assign(n, Result<std::uint64_t>(std::uint64_t{0}));
  const bool one_request = std::all_of(take.requests.begin(), take.requests.end(),
                                       [&](const RequestState* r) { return r == take.requests[0]; });
  take.reports.assign(one_request ? 1 : n, Report());
  take.fill = 0;
  if (n == 0) return true;
  const bool traced = take.requests[0]->traced();
  if (!worker) {
    if (traced) nvtx::push("ferry worker set-up");
    std::call_once(restart_call_made_, [this] {
      restart_call_ = [weak = weak_from_this()] {
        if (auto queue = weak.lock()) queue->restart();
      };
    });
    auto made = take.ops[0].request->make_worker(WorkerWait{this, &restart_call_});
    if (traced) nvtx::pop();
    if (!made.ok()) {
      std::fill(take.results.begin(), take.results.end(), Result<std::uint64_t>(made.status()));
      return true;
    }
    if (!*made) return false;
    worker = std::move(*made);
  }
  // Ops that waited for room in the pinned budget: their reports say how long (a request's longest wait).
  for (const auto& [i, since] : take.waited) {
    const auto waited = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(take.started - since).count());
    std::uint64_t& field = report_of(take.reports, i).io.pinned_wait_ns;
    field = std::max(field, waited);
  }
  if (traced) {
    std::uint64_t bytes = 0;
    for (const Op& op : take.ops) bytes += op.task.length;
    const std::string label =
        fmt::format("ferry task{} {} {} bytes at offset {}", n > 1 ? "s" : "",
                    route_name(take.ops[0].request->decision_for(take.ops[0].task).route), bytes,
                    take.ops[0].task.file_offset);
    nvtx::push(label.c_str());
  }
  // A request that was cancelled or failed moves no more bytes: its ops are retired unrun, and the others run
  // in spans of consecutive ops (all of them in one span but where a request stopped).
  const std::span<Report> reports(take.reports);
  for (std::size_t i = 0; i < n;) {
    if (take.requests[i]->stop_requested()) {
      take.results[i++] = Status(ErrorCode::cancelled, "the request was cancelled");
      continue;
    }
    std::size_t end = i + 1;
    while (end < n && !take.requests[end]->stop_requested()) ++end;
    worker->run(std::span<const Op>(take.ops).subspan(i, end - i), one_request ? reports : reports.subspan(i, end - i),
                std::span(take.results).subspan(i, end - i));
    i = end;
  }
  take.fill = worker->last_fill();
  if (traced) nvtx::pop();
  return true;
}

bool OpQueue::put_back(Take& take, std::uint64_t room_generation) {
  const auto now = Clock::now();
  std::lock_guard<SpinningMutex> lock(mutex_);
  take_pushed_locked();
  --busy_;
  queued_.insert(queued_.begin() + static_cast<std::ptrdiff_t>(head_), take.ops.size(), Queued{});
  for (std::size_t i = 0; i < take.ops.size(); ++i) queued_[head_ + i] = Queued{take.ops[i], take.requests[i], true, now};
  for (const auto& [i, since] : take.waited) queued_[head_ + i].put_back = since;  // waiting since the first time
  // Nothing may run until room comes: ops of stopped requests anywhere in the queue are dropped now (a
  // cancelled read waiting for pinned memory ends at once).
  for (std::size_t i = head_; i < queued_.size(); ++i) {
    Queued& q = queued_[i];
    if (q.request == nullptr || !q.request->stop_requested()) continue;
    if (take.dropped.empty() || take.dropped.back().first != q.request) take.dropped.emplace_back(q.request, 0);
    ++take.dropped.back().second;
    q.request = nullptr;
  }
  while (head_ < queued_.size() && queued_[head_].request == nullptr) ++head_;
  waiting_.store(queued_.size() - head_, std::memory_order_relaxed);
  take.clear();
  if (room_generation_.load() != room_generation) return true;  // room came before it was put back
  --draining_;
  return false;
}

void OpQueue::restart() {
  unsigned start = 0;
  {
    std::lock_guard<SpinningMutex> lock(mutex_);
    room_generation_.fetch_add(1);
    start = more_wanted_locked();
  }
  if (start > 0) start_drainers(start, std::chrono::microseconds(0));
}

void OpQueue::retire(Take& take, const Status& failed) {
  const std::size_t n = take.ops.size();
  if (n == 0) return;
  // Without its copies done, no op may say its bytes landed.
  if (!failed.ok()) std::fill(take.results.begin(), take.results.end(), Result<std::uint64_t>(failed));
  const auto elapsed = std::chrono::steady_clock::now() - take.started;
  const auto ns_each =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()) / n;
  if (take.reports.size() == 1) {
    take.requests[0]->retire(take.ops, take.results, take.reports[0], ns_each, /*gathered=*/false);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      take.requests[i]->retire(std::span<const Op>(&take.ops[i], 1), std::span(&take.results[i], 1), take.reports[i],
                               ns_each, /*gathered=*/true);
    }
  }
  take.clear();
}

void OpQueue::retire_all(std::deque<Take>& pending, const Status& failed, std::vector<Take>& spare) {
  for (Take& t : pending) {
    retire(t, failed);
    spare.push_back(std::move(t));
  }
  pending.clear();
}

void OpQueue::linger() {
  // Staying pays where one thread pushes small reads one after another (many threads keep the drainers
  // busier and share the wakes), and takes a core: only where one is left beside the submitting thread and
  // the drainers at work (on the 2-core CPU machine, a drainer that stayed made 4 KiB reads in flight from one
  // thread 1.3x slower).
  {
    std::lock_guard<SpinningMutex> lock(mutex_);
    if (!one_pusher_.load(std::memory_order_relaxed) || busy_ + 2 >= usable_cores()) return;
  }
  if (lingering_.exchange(true)) return;  // one stays already: this one leaves
  const auto until = Clock::now() + kLinger;
  while (!ops_waiting() && Clock::now() < until) std::this_thread::yield();
  lingering_.store(false);
}

bool OpQueue::lone_fill(const Take& take) {
  return take.ops.size() == 1 && take.ops[0].task.length >= take.ops[0].request->fill_bytes();
}

bool OpQueue::ends_requests(const Take& take) {
  // Consecutive ops of one request are counted together; a request retires ops only after this take's ran.
  for (std::size_t i = 0; i < take.requests.size();) {
    std::size_t j = i;
    while (j < take.requests.size() && take.requests[j] == take.requests[i]) ++j;
    if (take.requests[i]->ops_left() <= j - i) return true;
    i = j;
  }
  return false;
}

void OpQueue::drain() {
  // Keep the queue alive while this drains it, whoever lets go of it meanwhile.
  std::shared_ptr<OpQueue> keep = shared_from_this();
  std::unique_ptr<RouteWorker> worker;
  std::deque<Take> pending;  // ran, oldest first, not yet retired
  std::vector<Take> spare;   // retired, kept for their vectors' memory
  bool busy = false;
  bool lingered = false;  // found the queue empty since its last take, and stayed for more
  // Its last take was of one-op requests (small reads in flight, pushed one at a time): only then does it stay.
  // A batch's next push wants every worker started all the same.
  bool singles = false;
  auto& staging = process_staging_pool();
  bool worker_traced = false;  // its set-up had a range of its own (the request that made it was traced)
  // Waits for what is in flight and gives the worker's staging back, in a range of its own where its set-up had one.
  auto finish_worker = [&] {
    if (!worker) return Status();
    if (worker_traced) nvtx::push("ferry worker finish");
    const Status finished = worker->finish();
    if (worker_traced) nvtx::pop();
    worker.reset();
    return finished;
  };
  for (;;) {
    Take take;
    if (!spare.empty()) {
      take = std::move(spare.back());
      spare.pop_back();
    }
    // Others wait for room in the pinned budget: this worker's staging goes back to them (below) before
    // it takes more, and it asks for staging again behind them.
    const bool give_way = worker && worker->holds_pinned() && staging.room_wanted_by_other(this);
    const bool idle = !worker && pending.empty();
    const bool may_stay = singles && !lingered;
    if (give_way || !take_next(take, busy, /*stop_if_empty=*/idle && !may_stay)) {
      if (idle) {
        if (!may_stay) return;
        linger();
        lingered = true;
        continue;
      }
      // Nothing waits (or others want the staging): wait for what is in flight, give the worker's staging
      // back, then retire (so that the last request this worker served holds none of its staging once
      // done), and look again.
      retire_all(pending, finish_worker(), spare);
      continue;
    }
    for (const auto& [request, n] : take.dropped) request->drop(n);
    take.dropped.clear();
    if (take.ops.empty()) continue;
    lingered = false;
    singles = take.requests.front()->ops() == 1;
    // A worker that goes from a request of several ops (a batch) to another request's ops first retires what
    // it ran of the first, waiting for its copies: that request's end then does not wait for this worker's next
    // read (with two batches in flight, the first completed only once every worker had read its share of the
    // second: Batch.ABatchCompletesWhileTheNextOneIsStillBeingRead).
    if (worker && !pending.empty() && !lone_fill(pending.back())) {
      const RequestState* was = pending.back().requests.front();
      if (was->ops() > 1 && take.requests.front() != was) {
        retire_all(pending, worker->wait_landed(pending.back().fill), spare);
      }
    }
    const std::uint64_t room_generation = room_generation_.load();
    const bool had_worker = worker != nullptr;
    if (!run(take, worker)) {  // no room for a worker's staging: the ops wait in the queue, not on this thread
      busy = false;
      const bool again = put_back(take, room_generation);
      for (const auto& [request, n] : take.dropped) request->drop(n);
      take.dropped.clear();
      if (!again) return;
      continue;
    }
    if (!had_worker && worker) worker_traced = take.requests.front()->traced();
    pending.push_back(std::move(take));
    if (!worker) {  // it could not be made: every op taken failed with it
      retire_all(pending, Status(), spare);
      continue;
    }
    // A take that ends requests is waited for at once (unless it is a lone fill).
    const Take& ran = pending.back();
    if (!lone_fill(ran) && ends_requests(ran)) {
      // With nothing else waiting, the staging goes back first (as when the queue empties, below).
      retire_all(pending, ops_waiting() ? worker->wait_landed(ran.fill) : finish_worker(), spare);
      continue;
    }
    // More ops wait: retire what landed and go on with the same staging.
    if (!ops_waiting()) continue;
    while (!pending.empty() && worker->landed(pending.front().fill)) {
      retire(pending.front(), Status());
      spare.push_back(std::move(pending.front()));
      pending.pop_front();
    }
  }
}

}  // namespace ferry::detail
