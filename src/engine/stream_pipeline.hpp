// The CPU side of a stream-ordered request (File::read_async / write_async): the steps Ferry's threads do,
// and the two words of pinned memory it shares with the caller's CUDA stream: the gpu word, which the stream
// writes as it passes the request's points (1 when it reaches it, one more after each copy), and the cpu
// word, Ferry's count of the steps ended from the first, which the stream waits on. Nothing here calls CUDA:
// steps run on stream_pool(), started by one watcher thread that reads every pending request's gpu word, so
// every wait Ferry queued is met (docs/stream-order.md argues it).
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
  /// Called once after the last step ended, off the watcher: the owner lets go of the File.
  using StepsEnded = std::function<void()>;
  /// Called once the stream is done with the request and no step runs, on the watcher (it must not block,
  /// and leaves user callbacks to the shared pool): the owner frees the slots and words, completes the future.
  using Finish = std::function<void(PipelineOutcome)>;

  /// `gpu` and `cpu` are words of pinned host memory the stream can see, both 0 now. Starts nothing:
  /// call watch() once the stream's commands are queued.
  StreamPipeline(PipelinePlan plan, std::atomic<std::uint32_t>* gpu, std::atomic<std::uint32_t>* cpu, Step step,
                 Begin begin, StepsEnded steps_ended, Finish finish, std::string description);

  /// Hands the pipeline to the watcher. Call it before queueing the stream's commands: a wait already
  /// queued must be met while the caller's thread still queues the rest (docs/stream-order.md).
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
