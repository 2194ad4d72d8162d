// Small reads of one File gathered: a thread that submits a one-task read while its previous small read is
// still in flight is reading ahead (a data loader keeping requests in flight), not about to wait for it, so
// the read joins the File's gathered reads instead of becoming a pool job of its own. Workers drain them
// several at a time, as pread_batch's pieces: one staging kit, the reads back to back into its bounce
// buffers, one copy per run of destinations that follow one another, one wait for the stream; then every
// read completes its own Future, with its own report.
//
// Why: a request of its own costs each small read a pool job, a staging kit taken and returned, a stream
// synchronised and its reports merged, under locks every request shares; measured on the H200 machine a 4
// KiB read in flight cost 34-38 us of CPU where a plain pread + copy + synchronise loop spends 22
// (bench/NOTES.md, 2026-12-03). A thread whose previous read is done keeps the one-job path: the submitter
// runs its read itself when it waits (engine.md, "One small request at a time").
// Thread safety: add() may be called from any thread; the draining runs on the shared pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/decision.hpp"
#include "base/task.hpp"
#include "ferry/file.hpp"
#include "platform/cuda/buffer_kind.hpp"
#include "platform/cuda/cuda_api.hpp"

namespace ferry::detail {

class FileState;
class RequestState;

/// One read of one task, waiting to be drained.
struct GatheredRead {
  Task task;                        // buffer_offset: the destination's address
  Decision decision;                // route_for()'s, host or staged
  BufferKind buffer;                // the destination's memory
  const CudaApi* cuda = nullptr;    // the driver, for a destination in GPU memory
  std::uint64_t file_bytes = 0;     // the file's size the read was planned by
  bool size_asked = true;           // asked for this read; else the size the File saw last (FileState::gather_read)
  // The read holds one of the File's uses (FileState::Use::keep) until its round ends.
  std::shared_ptr<RequestState> state;  // a deferred request: the read's Future
};

/// The reads waiting, oldest first, in one vector that keeps its memory while reads come and go (a deque
/// made and freed a block every few reads, on the submitter's thread and then the drainer's).
class ReadFifo {
 public:
  std::size_t size() const { return reads_.size() - head_; }
  bool empty() const { return size() == 0; }
  const GatheredRead& front() const { return reads_[head_]; }
  void push(GatheredRead read) { reads_.push_back(std::move(read)); }
  GatheredRead pop();

 private:
  std::vector<GatheredRead> reads_;  // from head_ on: the reads waiting; before it, moved from
  std::size_t head_ = 0;
};

class ReadGather {
 public:
  ReadGather();
  ~ReadGather();
  ReadGather(const ReadGather&) = delete;
  ReadGather& operator=(const ReadGather&) = delete;

  /// Whether a read route_for() sent this way into `buffer` is gathered when its thread reads ahead: the
  /// host route, and the staged route into GPU memory (cuFile's routes read one request at a time).
  static bool gathers(const Decision& decision, const BufferKind& buffer);
  /// Whether the calling thread's last small read (note_small_read) is still in flight.
  static bool thread_reads_ahead();
  /// Remembers the calling thread's newest small read, gathered or not, and what its destination is
  /// (`buffer`, classified with `cuda`).
  static void note_small_read(const std::shared_ptr<RequestState>& state, const BufferKind& buffer,
                              const CudaApi* cuda);
  /// The classification of the GPU allocation that the calling thread's last small read lands in, if
  /// [address, address + size) lies in it and it was classified with `cuda`; else nullptr. Asked while that
  /// read is in flight (thread_reads_ahead()): an allocation a read is landing in cannot have been freed
  /// (freeing it would be the caller's use after free whatever Ferry did), so a buffer inside it is the same
  /// memory of the same GPU, and needs no driver call (cuPointerGetAttributes, 0.4-0.8 us on the H200
  /// machine) to say so.
  static const BufferKind* allocation_in_flight(const CudaApi* cuda, const void* address, std::uint64_t size);

  /// Queues `read` for `file`'s workers to drain and returns its Future. `file` must own this gatherer.
  Future add(FileState& file, GatheredRead read);

 private:
  // The reads waiting and the drainers at work, of one process: a child of fork() has none of its parent's
  // threads (and perhaps a copy of a lock held), so it starts a new queue (fork_generation()), leaving the
  // parent's reads, which it cannot complete, as the engine leaves the parent's requests.
  struct Queue {
    explicit Queue(std::uint64_t g) : generation(g) {}
    const std::uint64_t generation;
    std::mutex mutex;
    // Guarded by mutex:
    ReadFifo queued;
    unsigned draining = 0;  // drainer jobs running or in the pool's queue
    unsigned waiting = 0;   // of those, in the pool's queue (not begun)
  };
  Queue& queue();

  static void drain_job(void* file);  // a pool job: drains the File's gatherer
  void drain(FileState& file);
  void run_round(FileState& file, std::vector<GatheredRead>& round);
  // Submits one more drainer job (the queue's mutex not held).
  void start_drainer(FileState& file);

  std::atomic<Queue*> queue_;
};

}  // namespace ferry::detail
