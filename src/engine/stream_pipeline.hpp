// The CPU side of a stream-ordered request (File::read_async / write_async): the steps Ferry's threads
// do, and the two words of pinned memory it shares with the caller's CUDA stream.
//
//   gpu word  written by the stream (cuStreamWriteValue32) as it passes the request's points: 1 when it
//             reaches the request, then one more after each of its copies; Ferry only reads it.
//   cpu word  written by Ferry: how many of the request's steps, counted from the first, have ended;
//             the stream waits on it (cuStreamWaitValue32) before each copy and at the end.
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

/// When step i may run, as the least value of the gpu word it needs.
enum class StepGate {
  stream_reached,  // every step: once the stream reached the request (gpu >= 1). Host buffers.
  slot_free,       // reads through `window` bounce slots: step i reuses the slot of step i - window,
                   // whose copy must be done (gpu >= i - window + 2); the first `window` need gpu >= 1
  copied_out,      // writes: step i writes what the stream's copy i put in its slot (gpu >= i + 2)
};

struct PipelinePlan {
  std::size_t steps = 0;
  StepGate gate = StepGate::stream_reached;
  std::size_t window = 0;        // slot_free: the number of bounce slots
  unsigned max_parallel = 1;     // steps running at once
  std::uint32_t gpu_final = 0;   // the gpu word's last value when every command is queued
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

  /// `gpu` and `cpu` are words of pinned host memory the stream can see, both 0 now. Starts nothing:
  /// call watch() once the stream's commands are queued.
  StreamPipeline(PipelinePlan plan, std::atomic<std::uint32_t>* gpu, std::atomic<std::uint32_t>* cpu, Step step,
                 Begin begin, StepsEnded steps_ended, Finish finish, std::string description);

  /// Hands the pipeline to the watcher. Call it before queueing the stream's commands: a wait already
  /// queued must be met while the caller's thread still queues the rest (its next driver call may wait
  /// behind another thread's implicit synchronisation, which waits for this very stream).
  static void watch(std::shared_ptr<StreamPipeline> pipeline);
  /// The caller's thread has queued what it could: `error` (OK when all of it) and the last gpu-word
  /// value actually queued, which becomes the end (0: nothing was queued; the pipeline ends at once).
  void queueing_ended(const Status& error, std::uint32_t gpu_final);

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
  // The watcher's look at the gpu word: begins the request, starts steps, and sees the end. True once
  // finished (the watcher lets go of it).
  bool poll();
  void run_steps();  // a job on the stream pool: runs steps while their gates are open
  std::uint32_t gate_value(std::size_t index) const;
  void release_if_stopped(std::unique_lock<std::mutex>& lock);  // sets the cpu word once nothing runs
  void step_ended(std::size_t index, Result<std::uint64_t> result);

  const PipelinePlan plan_;
  std::atomic<std::uint32_t>* const gpu_;
  std::atomic<std::uint32_t>* const cpu_;
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
  std::uint32_t gpu_final_;     // the gpu word's value once the stream is done with the request
  std::size_t next_step_ = 0;
  unsigned running_ = 0;        // steps running now, and jobs about to
  std::size_t prefix_ = 0;      // steps ended, counted from the first
  std::vector<bool> ended_;     // per step
  Status status_;
  Report report_;
  std::shared_ptr<StreamPipeline> self_;  // set by watch(): alive until finished
};

}  // namespace ferry::detail
