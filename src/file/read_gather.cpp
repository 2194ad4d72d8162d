// ReadGather: a File's small reads queued by threads that read ahead, drained by pool workers in rounds.
#include "file/read_gather.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "backends/route_backend.hpp"
#include "base/fork_guard.hpp"
#include "base/setup_ledger.hpp"
#include "engine/request.hpp"
#include "engine/thread_pool.hpp"
#include "file/file_state.hpp"
#include "file/route_selection.hpp"
#include "report/process_report.hpp"

namespace ferry::detail {
namespace {

// Another worker joins the draining while more reads are queued than this many for each one draining:
// one drainer for a few reads saves the wakes, many keep every core reading when many are in flight.
constexpr std::size_t kReadsPerDrainer = 4;
// The most reads one round takes: a round's reads complete together, after its last copy.
constexpr std::size_t kMostPerRound = 64;
// As a request's job (request.cpp): after this long, a drainer lets other queued work go first.
constexpr std::chrono::milliseconds kTurn{1};

// The calling thread's newest small read, and its destination's classification.
struct ThreadSmallRead {
  std::weak_ptr<RequestState> state;
  BufferKind buffer;
  const CudaApi* cuda = nullptr;
};
thread_local ThreadSmallRead t_last_small_read;

// Reads that one backend can serve together: same route and the same GPU.
bool same_target(const GatheredRead& a, const GatheredRead& b) {
  return a.decision.route == b.decision.route && a.buffer.device == b.buffer.device && a.cuda == b.cuda;
}

}  // namespace

bool ReadGather::gathers(const Decision& decision, const BufferKind& buffer) {
  return decision.route == Route::host || (decision.route == Route::staged && !buffer.is_host());
}

bool ReadGather::thread_reads_ahead() {
  auto last = t_last_small_read.state.lock();
  return last && !last->finished();
}

void ReadGather::note_small_read(const std::shared_ptr<RequestState>& state, const BufferKind& buffer,
                                 const CudaApi* cuda) {
  t_last_small_read.state = state;
  t_last_small_read.buffer = buffer;
  t_last_small_read.cuda = cuda;
}

const BufferKind* ReadGather::allocation_in_flight(const CudaApi* cuda, const void* address, std::uint64_t size) {
  const ThreadSmallRead& last = t_last_small_read;
  const bool same = cuda != nullptr && last.cuda == cuda && last.buffer.kind == MemoryKind::device &&
                    last.buffer.holds(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(address)), size);
  return same ? &last.buffer : nullptr;
}

GatheredRead ReadFifo::pop() {
  GatheredRead read = std::move(reads_[head_++]);
  if (head_ == reads_.size()) {  // the usual case: drained to the end, the memory kept
    reads_.clear();
    head_ = 0;
  } else if (head_ >= kMostPerRound && head_ * 2 >= reads_.size()) {  // never empty: drop the front half
    reads_.erase(reads_.begin(), reads_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  return read;
}

ReadGather::ReadGather() : queue_(new Queue(fork_generation())) {}

ReadGather::~ReadGather() { delete queue_.load(); }

ReadGather::Queue& ReadGather::queue() {
  Queue* q = queue_.load(std::memory_order_acquire);
  const std::uint64_t generation = fork_generation();
  if (q->generation == generation) return *q;
  // A forked child's first use: a new queue; the parent's (its reads, perhaps its lock held) is left alone.
  auto* fresh = new Queue(generation);
  if (queue_.compare_exchange_strong(q, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;  // another thread of the child made one first
  return *q;
}

Future ReadGather::add(FileState& file, GatheredRead read) {
  auto state = read.state;
  const unsigned limit = std::max(1u, file.parallel_tasks());
  bool start = false;
  {
    Queue& q = queue();
    std::lock_guard<std::mutex> lock(q.mutex);
    q.queued.push(std::move(read));
    if (q.draining < limit && q.queued.size() > std::size_t{q.draining} * kReadsPerDrainer) {
      ++q.draining;
      ++q.waiting;
      start = true;
    }
  }
  if (start) start_drainer(file);
  return Future(std::move(state));
}

void ReadGather::start_drainer(FileState& file) {
  shared_pool().submit(PoolJob(&ReadGather::drain_job, file.shared_from_this()), std::max(1u, file.parallel_tasks()));
}

void ReadGather::drain_job(void* file) {
  auto* state = static_cast<FileState*>(file);
  state->gather.drain(*state);
}

void ReadGather::drain(FileState& file) {
  const auto turn_ends = std::chrono::steady_clock::now() + kTurn;
  std::vector<GatheredRead> round;
  bool begun = false;
  Queue& q = queue();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(q.mutex);
      if (!begun) --q.waiting;
      begun = true;
      if (q.queued.empty()) {
        --q.draining;
        return;
      }
      // A fair share of what is queued, so that the other drainers have reads too.
      const std::size_t share = std::clamp<std::size_t>((q.queued.size() + q.draining - 1) / q.draining, 1,
                                                        kMostPerRound);
      if (round.capacity() < share) round.reserve(share);
      round.push_back(q.queued.pop());
      while (round.size() < share && !q.queued.empty() && same_target(q.queued.front(), round.front())) {
        round.push_back(q.queued.pop());
      }
    }
    run_round(file, round);
    round.clear();
    if (std::chrono::steady_clock::now() >= turn_ends && shared_pool().queued() > 0) {
      {
        // Other work waits: this drainer goes behind it (still counted as draining).
        std::lock_guard<std::mutex> lock(q.mutex);
        ++q.waiting;
      }
      start_drainer(file);
      return;
    }
  }
}

void ReadGather::run_round(FileState& file, std::vector<GatheredRead>& round) {
  const SetupCosts setup_before = process_setup_costs();
  // Reads cancelled before the round began do no I/O.
  std::vector<Task> tasks;
  std::vector<std::size_t> read_of;  // tasks[j] is round[read_of[j]]'s
  tasks.reserve(round.size());
  read_of.reserve(round.size());
  std::uint64_t file_bytes = std::numeric_limits<std::uint64_t>::max(), bytes = 0;
  for (std::size_t i = 0; i < round.size(); ++i) {
    if (round[i].state->stop_requested()) continue;
    tasks.push_back(round[i].task);
    read_of.push_back(i);
    file_bytes = std::min(file_bytes, round[i].file_bytes);
    bytes += round[i].task.length;
  }
  std::vector<Report> reports(tasks.size());
  std::vector<Result<std::uint64_t>> results(tasks.size(), Result<std::uint64_t>(std::uint64_t{0}));
  Report round_report;  // what the round's worker says beyond its reads (set-up, waiting for copies)
  const auto started = std::chrono::steady_clock::now();
  if (!tasks.empty()) {
    // The size the earliest of them saw: O_DIRECT only below it (posix_source.cpp).
    SourceRequest request{Direction::read, Extent{true, file_bytes}, bytes, nullptr};
    const GatheredRead& first = round[read_of[0]];
    RoutePlanDetail plan;
    plan.decision = first.decision;
    plan.buffer = first.buffer;
    plan.cuda = first.cuda;
    auto backend = make_pieces_backend(file, request, plan, static_cast<unsigned>(tasks.size()));
    Status status;
    if (auto worker = backend->make_worker(); worker.ok()) {
      (*worker)->run_batch(tasks, reports, results);
      status = (*worker)->finish(round_report);
    } else {
      status = worker.status();
    }
    // Without the whole round's copies done, no read of it may say its bytes landed.
    if (!status.ok()) std::fill(results.begin(), results.end(), Result<std::uint64_t>(status));
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started);
  const std::uint64_t ns_each = static_cast<std::uint64_t>(elapsed.count()) / std::max<std::size_t>(1, tasks.size());

  const std::string setup_note = setup_note_since(setup_before);
  std::vector<Result<Transfer>> outcomes;  // round[i]'s
  outcomes.reserve(round.size());
  Report total = std::move(round_report);  // the File's and the process's share of the round
  for (std::size_t i = 0, j = 0; i < round.size(); ++i) {
    if (j == tasks.size() || read_of[j] != i) {  // cancelled before the round began
      outcomes.emplace_back(Status(ErrorCode::cancelled, "the request was cancelled"));
      continue;
    }
    const GatheredRead& read = round[i];
    Report& report = reports[j];
    const Result<std::uint64_t>& got = results[j];
    ++j;
    if (!setup_note.empty()) report.add_note(setup_note);
    if (!got.ok()) {
      outcomes.emplace_back(got.status());
    } else if (*got < read.task.length && read.size_asked) {  // it had the size: the file shrank since
      outcomes.emplace_back(EndOfFileRule{false, file.path, read.file_bytes}.shrank(read.task, *got));
    } else {  // whole, or short where the data ends (a size seen before this read)
      report.count(read.decision.route, read.decision.reason, read.decision.detail, *got, ns_each, 1);
      ++report.io.gathered_ops;
      total.merge(report);
      outcomes.emplace_back(Transfer{*got, std::move(report)});
      continue;
    }
    total.merge(report);  // a failed read's I/O counters and notes belong to the File's trail too
  }
  file.add_to_report(total);
  add_to_process_report(total);
  // Every use ends before any read is done: a callback of one may close the File, which waits for all.
  file.end_uses(static_cast<unsigned>(round.size()), fork_generation());  // a round ends in its own process
  // Callbacks run next, on this thread, and may wait for reads still queued (a nested read's get(), a
  // close()): waiting on a worker runs the pool's queued jobs, so one drainer job must be there for them
  // rather than depend on this one coming back.
  if (std::any_of(round.begin(), round.end(), [](const GatheredRead& r) { return r.state->has_callbacks(); })) {
    bool start = false;
    {
      Queue& q = queue();
      std::lock_guard<std::mutex> lock(q.mutex);
      if (!q.queued.empty() && q.waiting == 0) {
        ++q.draining;
        ++q.waiting;
        start = true;
      }
    }
    if (start) start_drainer(file);
  }
  for (std::size_t i = 0; i < round.size(); ++i) {
    round[i].state->complete_deferred(std::move(outcomes[i]), RequestState::CallbacksOn::here);
  }
}

}  // namespace ferry::detail
