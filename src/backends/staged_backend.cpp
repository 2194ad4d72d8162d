// Staged workers: bounce buffers in rotation, copies overlapped with the next read.
#include "backends/staged_backend.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "backends/staging_pool.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/cuda/stream_wait.hpp"

namespace ferry::detail {
namespace {

class StagedBackend final : public RouteBackend {
 public:
  StagedBackend(Source* source, const SourceRequest& request, const StagedTarget& target,
                Decision decision, bool shared)
      : RouteBackend(request, target.destination, std::move(decision), source, shared), target_(target) {}

  Result<std::unique_ptr<RouteWorker>> make_worker(const WorkerWait& wait) override;
  std::uint64_t fill_bytes() const override { return target_.bounce_buffer_size; }
  std::shared_ptr<void> borrow_thread() override {
    return std::make_shared<ScopedDeviceContext>(*target_.api, target_.device);
  }

  StagedTarget target_;
};

// The staged request an op belongs to: a worker runs only ops of requests it is shared with, all staged.
const StagedBackend& staged(const Op& op) { return static_cast<const StagedBackend&>(*op.request); }

class StagedWorker final : public RouteWorker {
 public:
  StagedWorker(const StagedBackend& maker, std::unique_ptr<StagingKit> kit)
      : source_(maker.source()),
        api_(*maker.target_.api),
        device_(maker.target_.device),
        kit_(std::move(kit)),
        pending_(kit_->buffers.size(), false) {}

  ~StagedWorker() override {
    // finish() normally returned the kit; if it could not (a failed sync), free it rather than reuse it.
    if (kit_) process_staging_pool().release(std::move(kit_), /*destroy=*/true);
  }

  // Ops that fit in a bounce buffer are read back to back into one (packs()) and each run of them whose
  // destinations follow one another moves with one copy; larger ones, writes, scattered reads and ramped ones
  // go a piece at a time.
  void run(std::span<const Op> ops, std::span<Report> reports, std::span<Result<std::uint64_t>> results) override {
    std::size_t next = 0;
    while (next < ops.size()) {
      const Op& op = ops[next];
      if (!packs(op) || op.task.length > kit_->buffer_size) {
        results[next] = run_in_pieces(op, report_of(reports, next));
        ++next;
        continue;
      }
      const std::size_t first = next;
      auto begun = begin_fill();
      if (!begun.ok()) {
        for (std::size_t i = first; i < ops.size(); ++i) results[i] = begun.status();
        return;
      }
      const std::size_t slot = *begun;
      char* bounce = static_cast<char*>(kit_->buffers[slot]);
      reads_.clear();
      dsts_.clear();
      std::uint64_t used = 0;
      bool one_request = true;
      while (next < ops.size() && used + ops[next].task.length <= kit_->buffer_size && packs(ops[next])) {
        const Op& o = ops[next];
        reads_.push_back(TaskRead{o.task, bounce + used});
        dsts_.push_back(static_cast<CUdeviceptr>(o.request->destination().address(o.task.buffer_offset)));
        one_request = one_request && o.request == ops[first].request;
        used += o.task.length;
        ++next;
      }
      auto got = results.subspan(first, reads_.size());
      if (one_request && reports.size() == 1) {
        source_->read_batch(ops[first].request->source_request(), reads_, "staged", reports[0], got);
      } else {  // each op's own request: its view of the source, its counters
        for (std::size_t i = 0; i < reads_.size(); ++i) {
          got[i] = source_->read(ops[first + i].request->source_request(), reads_[i].task, reads_[i].dst, "staged",
                                 report_of(reports, first + i));
        }
      }
      copy_runs(got);
      pending_[slot] = true;
      unmarked_slot_ = slot;
    }
  }

  std::uint64_t last_fill() const override { return fills_; }

  bool landed(std::uint64_t fill) override {
    const std::size_t slots = kit_->buffers.size();
    if (fill == 0 || fill + slots <= fills_) return true;  // its buffer was waited for before reuse
    const std::size_t slot = (fill - 1) % slots;
    if (!pending_[slot]) return true;
    if (!mark_last_copy().ok()) return false;  // finish() says what failed
    if (api_.cuEventQuery(kit_->events[slot]) != CUDA_SUCCESS) return false;
    pending_[slot] = false;
    return true;
  }

  Status wait_landed(std::uint64_t fill) override {
    if (landed(fill)) return Status();
    return wait_slot(static_cast<std::size_t>((fill - 1) % kit_->buffers.size()));
  }

  Status finish() override {
    FERRY_RETURN_IF_ERROR(cuda_check(api_, wait_for_stream(api_, kit_->stream),
                                     [&] { return fmt::format("waiting for copies to GPU {}", device_); }));
    process_staging_pool().release(std::move(kit_));
    return Status();
  }

  bool holds_pinned() const override { return kit_ != nullptr; }

 private:
  static bool packs(const Op& op) {
    return is_read(op.request->source_request().direction) && !op.request->destination().is_scattered() &&
           !staged(op).target_.ramp;
  }

  // The bounce buffer of the next fill (fills take the buffers in turn), once no copy uses it. The newest
  // copy's event is recorded first, before anything else is queued on the stream.
  Result<std::size_t> begin_fill() {
    FERRY_RETURN_IF_ERROR(mark_last_copy());
    const auto slot = static_cast<std::size_t>(fills_++ % kit_->buffers.size());
    FERRY_RETURN_IF_ERROR(wait_slot(slot));
    return slot;
  }

  Result<std::uint64_t> run_in_pieces(const Op& op, Report& report) {
    const Task& t = op.task;
    const bool reading = is_read(op.request->source_request().direction);
    std::uint64_t done = 0;
    while (done < t.length) {
      // A worker's first reads of a large request are short and grow (256 KiB, 512 KiB, ... up to the bounce
      // buffer): the GPU copies nothing until some read has finished, and a timeline of 256 MiB requests on
      // the H200 showed the copy engine waiting for the first 1 MiB reads (bench/results/2026-11-30-h200-
      // timeline). Small pieces start it sooner; growing ones keep the copies large after that.
      std::uint64_t piece_size = kit_->buffer_size;
      if (reading && staged(op).target_.ramp) {
        piece_size = std::min(piece_size, ramp_bytes_);
        ramp_bytes_ = std::min<std::uint64_t>(ramp_bytes_ * 2, kit_->buffer_size);
      }
      // O_DIRECT pieces must stay aligned: a shortened first piece keeps the alignment of the task.
      Task piece{t.file_offset + done, std::min(piece_size, t.length - done), t.buffer_offset + done, t.aligned};
      FERRY_ASSIGN_OR_RETURN(std::uint64_t n, reading ? read_piece(op, piece, report) : write_piece(op, piece, report));
      done += n;
      if (n < piece.length) break;  // EOF
    }
    return done;
  }

  // Waits until bounce buffer `slot` is no longer the source or target of a copy in flight.
  Status wait_slot(std::size_t slot) {
    if (!pending_[slot]) return Status();
    // Not cuEventSynchronize, which spins in the driver: a worker waits for a buffer between every two fills,
    // and 16 spinning workers took the cores their reads needed (batches 0.5x on the H200 machine).
    FERRY_RETURN_IF_ERROR(cuda_check(api_, wait_for_event(api_, kit_->events[slot]), "waiting for a bounce buffer's copy"));
    pending_[slot] = false;
    return Status();
  }

  // The event after the newest copy is recorded when something needs it (the next fill's wait for its
  // buffer, landed()): nothing else was queued on the stream in between, so it marks the same point. When
  // finish() waits for the whole stream, none is: a small read its waiter runs itself records none.
  Status mark_last_copy() {
    if (!unmarked_slot_) return Status();
    const std::size_t slot = *unmarked_slot_;
    unmarked_slot_.reset();
    return cuda_check(api_, api_.cuEventRecord(kit_->events[slot], kit_->stream), "cuEventRecord");
  }

  Result<std::uint64_t> read_piece(const Op& op, const Task& piece, Report& report) {
    FERRY_ASSIGN_OR_RETURN(const std::size_t slot, begin_fill());
    const char* bounce = static_cast<const char*>(kit_->buffers[slot]);
    FERRY_ASSIGN_OR_RETURN(std::uint64_t n, source_->read(op.request->source_request(), piece, kit_->buffers[slot],
                                                         "staged", report));
    if (n == 0) return n;
    runs_.clear();
    op.request->destination().for_each_part(piece.buffer_offset, n, [&](std::uintptr_t address, std::uint64_t bytes,
                                                                       std::uint64_t offset) {
      runs_.push_back(CopyRun{static_cast<CUdeviceptr>(address), bounce + (offset - piece.buffer_offset), bytes, 0, 0});
    });
    Status copied;
    queue_runs([&](const CopyRun&, const Status& why) {
      if (copied.ok()) copied = why;
    }, [&] { return fmt::format("from file offset {}", piece.file_offset); });
    FERRY_RETURN_IF_ERROR(copied);
    pending_[slot] = true;
    unmarked_slot_ = slot;
    return n;
  }

  Result<std::uint64_t> write_piece(const Op& op, const Task& piece, Report& report) {
    void* bounce = kit_->buffers[0];
    const auto src = static_cast<CUdeviceptr>(op.request->destination().address(piece.buffer_offset));
    FERRY_RETURN_IF_ERROR(cuda_check(api_, api_.cuMemcpyDtoHAsync_v2(bounce, src, piece.length, kit_->stream), [&] {
      return fmt::format("copying {} bytes from GPU {} for file offset {}", piece.length, device_, piece.file_offset);
    }));
    // The stream is idle after this: every buffer's copies are done.
    FERRY_RETURN_IF_ERROR(cuda_check(api_, api_.cuStreamSynchronize(kit_->stream), "cuStreamSynchronize"));
    unmarked_slot_.reset();
    std::fill(pending_.begin(), pending_.end(), false);
    FERRY_RETURN_IF_ERROR(source_->write(op.request->source_request(), piece, bounce, "staged", report));
    return piece.length;
  }

  // Moves reads_ to the GPU: each run of them that lands contiguously and was read whole is one copy, and
  // the runs of one fill go to the driver in one call where it takes batched copies (pieces whose
  // destinations do not follow one another: one call, not one copy launch each). A failed copy fails the
  // tasks of its run, a failed batched copy those of every run.
  void copy_runs(std::span<Result<std::uint64_t>> got) {
    runs_.clear();
    std::size_t i = 0;
    while (i < reads_.size()) {
      if (!got[i].ok() || *got[i] == 0) {
        ++i;
        continue;
      }
      CopyRun run{dsts_[i], static_cast<const char*>(reads_[i].dst), 0, i, i};
      bool whole = true;
      while (i < reads_.size() && whole && got[i].ok() && *got[i] > 0 &&
             dsts_[i] == run.dst + run.bytes &&
             static_cast<const char*>(reads_[i].dst) == run.src + run.bytes) {
        run.bytes += *got[i];
        whole = *got[i] == reads_[i].task.length;
        ++i;
      }
      run.end = i;
      runs_.push_back(run);
    }
    queue_runs([&](const CopyRun& run, const Status& why) { std::fill(got.begin() + run.begin, got.begin() + run.end, why); },
               [&] {
                 std::size_t pieces = 0;
                 for (const CopyRun& run : runs_) pieces += run.end - run.begin;
                 return fmt::format("of {} pieces", pieces);
               });
  }

  // Queues runs_ on the stream: in one batched call where the driver takes them and there are several, else
  // a copy each. `failed(run, why)` hears of each run whose copy could not be queued (every run, when the
  // batched call failed); `what()` says what was copied, for messages.
  template <typename Failed, typename What>
  void queue_runs(Failed&& failed, What&& what) {
    if (runs_.size() <= 1 || api_.cuMemcpyBatchAsync_v2 == nullptr) {
      for (const CopyRun& run : runs_) {
        Status copied = cuda_check(api_, api_.cuMemcpyHtoDAsync_v2(run.dst, run.src, run.bytes, kit_->stream), [&] {
          return fmt::format("copying {} bytes {} to GPU {}", run.bytes, what(), device_);
        });
        if (!copied.ok()) failed(run, copied);
      }
      return;
    }
    batch_dsts_.clear();
    batch_srcs_.clear();
    batch_sizes_.clear();
    std::uint64_t bytes = 0;
    for (const CopyRun& run : runs_) {
      batch_dsts_.push_back(run.dst);
      batch_srcs_.push_back(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(run.src)));
      batch_sizes_.push_back(run.bytes);
      bytes += run.bytes;
    }
    // One set of attributes for every copy: the bounce buffer is read in the stream's order.
    CUmemcpyAttributes in_stream_order{CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, {CU_MEM_LOCATION_TYPE_INVALID, 0},
                                       {CU_MEM_LOCATION_TYPE_INVALID, 0}, CU_MEMCPY_FLAG_DEFAULT};
    std::size_t first_copy = 0;
    Status copied = cuda_check(
        api_,
        api_.cuMemcpyBatchAsync_v2(batch_dsts_.data(), batch_srcs_.data(), batch_sizes_.data(), runs_.size(),
                                   &in_stream_order, &first_copy, 1, kit_->stream),
        [&] {
          return fmt::format("copying {} bytes {} to GPU {} in {} batched copies", bytes, what(), device_, runs_.size());
        });
    if (!copied.ok()) {
      for (const CopyRun& run : runs_) failed(run, copied);
    }
  }

  static constexpr std::uint64_t kFirstPieceBytes = 256 << 10;
  std::vector<TaskRead> reads_;     // the ops of the bounce buffer being filled, where each lands in it
  std::vector<CUdeviceptr> dsts_;   // and where each goes on the GPU
  // What queue_runs moves: `bytes` from `src` to `dst`; for copy_runs, ops [begin, end) of reads_.
  struct CopyRun {
    CUdeviceptr dst;
    const char* src;
    std::uint64_t bytes;
    std::size_t begin, end;
  };
  std::vector<CopyRun> runs_;
  std::vector<CUdeviceptr> batch_dsts_, batch_srcs_;  // a batched copy's arguments, kept between fills
  std::vector<std::size_t> batch_sizes_;

  Source* source_;  // the File's: every op it runs holds a use of that File
  const CudaApi& api_;
  int device_;
  std::unique_ptr<StagingKit> kit_;
  std::vector<bool> pending_;                 // a buffer's copies may still be in flight
  std::optional<std::size_t> unmarked_slot_;  // pending, its event not recorded yet (mark_last_copy)
  std::uint64_t fills_ = 0;                   // fills begun; fill f (from 1) used buffer (f - 1) % buffers
  std::uint64_t ramp_bytes_ = kFirstPieceBytes;  // the size of the next piece while the pipeline fills
};

Result<std::unique_ptr<RouteWorker>> StagedBackend::make_worker(const WorkerWait& wait) {
  const CudaApi& api = *target_.api;
  FERRY_RETURN_IF_ERROR(make_current(api, target_.device));
  FERRY_ASSIGN_OR_RETURN(auto kit, process_staging_pool().acquire({&api, target_.device, target_.bounce_buffer_size},
                                                                  target_.buffers_per_worker, wait.owner,
                                                                  wait.when_room));
  if (!kit) return std::unique_ptr<RouteWorker>();
  return std::unique_ptr<RouteWorker>(new StagedWorker(*this, std::move(kit)));
}

}  // namespace

std::shared_ptr<RouteBackend> make_staged_backend(Source* source, const SourceRequest& request,
                                                  const StagedTarget& target, Decision decision, bool shared) {
  return std::make_shared<StagedBackend>(source, request, target, std::move(decision), shared);
}

}  // namespace ferry::detail
