// The CPU side of a stream-ordered request (File::read_async / write_async): the steps Ferry's threads
// do, and the words of pinned memory it shares with the streams that carry the request's copies.
//
// A request's steps are dealt round robin over its lanes: step i belongs to lane i % lanes, as the lane's
// (i / lanes)-th. Lane 0 is the caller's stream; a large request adds streams of Ferry's as lanes 1, 2, ...
// so that one copy's wait and word write overlap another lane's transfer. Each lane has two words:
//
//   gpu word  written by the lane's stream (cuStreamWriteValue32): 2 + m after its m-th copy (lane 0's
//             is also 1 when the caller's stream reaches the request, and its last value is the end);
//             Ferry only reads it.
//   cpu word  written by Ferry: how many of the lane's steps, counted from its first, have ended; the lane
//             waits on it (cuStreamWaitValue32) before each copy and at the end.
//
// Nothing here calls CUDA, and no thread that runs a step ever waits for the GPU. Steps run on the stream
// pool (stream_pool()), whose threads run nothing else: no user callback, no other request's copies. One
// watcher thread reads the gpu words of every pending request and starts the steps they allow. So every
// stream wait Ferry queued is met by work that depends only on the CPU and on commands queued before
// that wait, however the driver serializes streams and whatever other threads do meanwhile
// (docs/stream-order.md argues it).
// Thread safety: all members may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

/// When step i (lane l = i % lanes, the lane's m = i / lanes -th) may run, as a least value of a gpu word.
enum class StepGate {
  stream_reached,  // every step: once the stream reached the request (lane 0's word >= 1). Host buffers.
  slot_free,       // reads through `window` bounce slots: step i reuses the slot of step i - window (the
                   // same lane's m - window / lanes), whose copy must be done (lane l's word >= m - window /
                   // lanes + 2); the first `window` steps need lane 0's word >= 1
  copied_out,      // writes: step i writes what lane l's m-th copy put in its slot (lane l's word >= m + 2)
};

struct PipelinePlan {
  std::size_t steps = 0;
  std::size_t lanes = 1;         // streams carrying the copies (1: the caller's alone)
  StepGate gate = StepGate::stream_reached;
  std::size_t window = 0;        // slot_free: the number of bounce slots, a multiple of `lanes`
  unsigned max_parallel = 1;     // steps running at once
};

/// What a finished pipeline hands its owner: the first error (or OK), the bytes the steps moved and
/// their operations.
struct PipelineOutcome {
  Status status;
  std::uint64_t bytes = 0;
  Report report;
};

class StreamPipeline {
 public:
  /// Runs step `index`; returns the bytes it moved. Errors stop the request.
  using Step = std::function<Result<std::uint64_t>(std::size_t index, Report& report)>;
  /// Called once before the first step runs, on the watcher (it must not block): an error fails the
  /// request without running a step (a File closed before the stream reached the request).
  using Begin = std::function<Status()>;
  /// Called once after the last step ended (before the stream is done with the request), off the
  /// watcher: the owner lets go of what the steps used on the CPU side (the File).
  using StepsEnded = std::function<void()>;
  /// Called once the stream is done with the request and no step runs, on the watcher (it must not block,
  /// and must leave user callbacks to the shared pool): the owner frees the slots and words and completes
  /// the future.
  using Finish = std::function<void(PipelineOutcome)>;

  /// The words of pinned host memory the streams can see, one of each per lane, all 0 now. Starts nothing:
  /// call watch() before the stream's commands are queued.
  using Words = std::vector<std::atomic<std::uint32_t>*>;
  StreamPipeline(PipelinePlan plan, Words gpu, Words cpu, Step step, Begin begin, StepsEnded steps_ended,
                 Finish finish, std::string description);

  /// Hands the pipeline to the watcher. Call it before queueing the stream's commands: a wait already
  /// queued must be met while the caller's thread still queues the rest (its next driver call may wait
  /// behind another thread's implicit synchronisation, which waits for this very stream).
  static void watch(std::shared_ptr<StreamPipeline> pipeline);
  /// The caller's thread has queued what it could: `error` (OK when all of it) and each lane's last
  /// gpu-word value actually queued; the request ends once every lane's word has reached it (all 0:
  /// nothing was queued; the pipeline ends at once).
  void queueing_ended(const Status& error, std::vector<std::uint32_t> gpu_final);

  /// Runs no further step; the request fails with `cancelled` unless it has ended. The stream is
  /// released (the cpu word set to the steps' count) once the steps already running have ended.
  void cancel();
  /// Bytes the ended steps moved.
  std::uint64_t bytes_done() const { return bytes_done_.load(std::memory_order_relaxed); }
  /// One line for watchdogs: what the request is, and the words' values against what it waits for.
  std::string describe() const;
  /// True once the stream is done with the request and it has been finished.
  bool finished() const;

 private:
  friend class StreamWatcher;
  struct Poll {
    bool finished = false;     // remove from the watcher
    bool wants_steps = false;  // a step may start now
  };
  // The watcher's look at the gpu word: begins the request, starts steps, and sees the end.
  Poll poll();
  void run_steps();  // a job on the stream pool: runs steps while their gates are open
  bool gate_open(std::size_t index) const;
  std::size_t lane_steps(std::size_t lane) const;  // how many of the steps are the lane's
  // The next step of the lanes whose gate is open, the lowest first; plan_.steps when none.
  std::size_t next_open_step() const;
  bool streams_done() const;  // every lane's word has reached its end
  bool release_if_stopped(std::unique_lock<std::mutex>& lock);  // sets the cpu word once nothing runs
  void step_ended(std::size_t index, Result<std::uint64_t> result);

  const PipelinePlan plan_;
  const Words gpu_;
  const Words cpu_;
  const Step step_;
  const Begin begin_;
  const StepsEnded steps_ended_;
  const Finish finish_;
  const std::string description_;
  std::atomic<std::uint64_t> bytes_done_{0};

  mutable std::mutex mutex_;
  bool begun_ = false;
  bool stopped_ = false;        // no further step starts (an error, a cancel, or every step started)
  bool released_ = false;       // the cpu word was set for good and steps_ended_ ran
  std::vector<std::uint32_t> gpu_final_;  // per lane: the word's value once its stream is done (set when
                                          // queueing ended; unreachable until then)
  std::vector<std::size_t> next_;          // per lane: its next step to start, counted in the lane
  std::size_t started_ = 0;     // steps started
  unsigned running_ = 0;        // steps running now, and jobs about to
  std::vector<std::size_t> prefix_;  // per lane: its steps ended, counted from its first
  std::size_t ended_count_ = 0;
  std::vector<bool> ended_;     // per step
  Status status_;
  Report report_;
  std::shared_ptr<StreamPipeline> self_;  // set by watch(): alive until finished
};

/// Lines describing every stream-ordered request that has not finished (for watchdogs); empty when none.
std::vector<std::string> pending_stream_pipelines();

}  // namespace ferry::detail
