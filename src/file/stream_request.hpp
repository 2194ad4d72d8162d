// The CPU side of a stream-ordered request (File::read_async / write_async): what it holds, and the steps
// Ferry's threads run for it. The stream writes the gpu word as it passes the request's points (1 on reaching
// it, one more after each copy) and waits on the cpu word, Ferry's count of the steps ended from the first.
// Nothing here calls CUDA: steps run on stream_pool(), started by one watcher thread that reads every pending
// request's gpu word, so every wait Ferry queued is met (docs/stream-order.md, "On Ferry's side").
// submit_on_stream (stream_order.cpp) fills a request, takes its slots and words and queues its commands.
// Thread safety: the request's data is written before watch() and only read after it (finish() alone gives the
// kits back); every member function may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/decision.hpp"
#include "base/direction.hpp"
#include "base/task.hpp"
#include "engine/request.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"
#include "file/file_state.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/staging_kit.hpp"
#include "source/source.hpp"

namespace ferry::detail {

/// A word of pinned, device-mapped host memory, as the CPU and the stream address it.
struct StreamWord {
  std::atomic<std::uint32_t>* host = nullptr;
  CUdeviceptr device = 0;
};

/// The words of one driver table. A request takes two and gives them back once its stream has passed its last
/// command, so a word is never in two requests' commands at once. Taking them may call the driver, so only the
/// caller's thread does (in stream_order.cpp); giving them back never does.
class StreamWords {
 public:
  explicit StreamWords(const CudaApi& api) : api_(api) {}
  ~StreamWords();
  /// A request's two words (gpu, cpu), both reading 0. Needs a current context (the pages are portable:
  /// usable from every context).
  Result<std::pair<StreamWord, StreamWord>> acquire();
  void release(const StreamWord& gpu, const StreamWord& cpu) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(gpu);
    free_.push_back(cpu);
  }

 private:
  static constexpr std::size_t kPageBytes = 4096;
  Status add_page();

  const CudaApi& api_;
  std::mutex mutex_;
  std::vector<void*> pages_;  // guarded by mutex_
  std::vector<StreamWord> free_;
};

/// A request's facts, as its messages and the watchdog name them.
struct RequestLabel {
  Direction direction;
  std::uint64_t size, offset;
  std::string path;
  void* stream;

  std::string text() const;
  /// `why` as the error of a request that could not be queued.
  Status error(const Status& why) const;
};

/// One stream-ordered request: queued by submit_on_stream, its steps run as its stream's gpu word allows.
class StreamRequest : public std::enable_shared_from_this<StreamRequest>, public DeferredWork {
 public:
  // Set by submit_on_stream before watch().
  std::shared_ptr<FileState> file;
  StreamOrder mechanism = StreamOrder::stream_copies;
  RequestLabel label;
  Decision decision;
  SourceRequest source_request;
  std::vector<Task> tasks;                        // one per step, never none
  char* buffer = nullptr;                         // the caller's (host memory: stream_wait)
  std::vector<std::unique_ptr<StagingKit>> kits;  // bounce slots (stream_copies)
  std::uint64_t pinned_wait_ns = 0;               // how long the submission waited for them
  std::vector<void*> slots;                       // step i uses slots[i % slots.size()]
  unsigned max_parallel = 1;                      // steps running at once
  StreamWords* words = nullptr;
  StreamWord gpu, cpu;
  std::weak_ptr<RequestState> future;  // completed by finish(); null once nobody holds the Future

  /// Hands the request to the watcher. Call it before queueing the stream's commands: a wait already queued
  /// must be met while the caller's thread still queues the rest (docs/stream-order.md).
  void watch();
  /// The caller's thread has queued what it could: `error` (OK when all of it) and the last gpu-word value
  /// actually queued, which becomes the end (0: nothing was queued; the request ends at once).
  void queueing_ended(const Status& error, std::uint32_t gpu_final);
  /// Runs no further step; the request fails with `cancelled` unless it has ended. The stream is released
  /// (the cpu word set to the steps' count) once the steps already running have ended.
  void cancel() override;
  /// Bytes the ended steps moved.
  std::uint64_t bytes_done() const override { return bytes_done_.load(std::memory_order_relaxed); }
  /// One line for watchdogs: what the request is, and the words' values against what it waits for. Empty
  /// once the stream is done with the request and it has been finished.
  std::string describe() const;

 private:
  friend class StreamWatcher;
  // The watcher's look at the gpu word: begins the request, starts steps, and sees the end. True once
  // finished (the watcher lets go of it).
  bool poll();
  void run_steps();  // a job on the stream pool: runs steps while their gates are open
  // One step: task `index` between the source and its slot (or the caller's host buffer). Returns its bytes.
  Result<std::uint64_t> step(std::size_t index, Report& report);
  void step_ended(std::size_t index, Result<std::uint64_t> result);  // under mutex_: counts the prefix
  std::uint32_t gate(std::size_t index) const;  // the least gpu word step `index` needs
  void release_if_stopped();                    // under mutex_: sets the cpu word once nothing runs
  // Once finished_ is set (nothing writes status_ or report_ any more), off the lock: gives back the slots and
  // words and ends the future (its callbacks go to the shared pool, never run on the watcher).
  void finish();

  std::atomic<std::uint64_t> bytes_done_{0};
  mutable std::mutex mutex_;
  bool begun_ = false;
  bool stopped_ = false;     // no further step starts (an error, a cancel, or every step started)
  bool released_ = false;    // the cpu word was set for good and the File's use ended
  bool finished_ = false;
  // The gpu word's value once the stream is done with the request: unreachable until queueing ended.
  std::uint32_t gpu_final_ = UINT32_MAX;
  std::size_t next_step_ = 0;
  unsigned running_ = 0;     // steps running now, and jobs about to
  std::size_t prefix_ = 0;   // steps ended, counted from the first
  std::vector<bool> ended_;  // per step
  // The File's use, from the stream reaching the request to its last step: close() never waits for a request
  // whose stream has not reached it.
  std::optional<FileState::Use> use_;
  Status status_;
  Report report_;
};

}  // namespace ferry::detail
