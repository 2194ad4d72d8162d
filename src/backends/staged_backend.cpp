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
  StagedBackend(std::shared_ptr<Source> source, const SourceRequest& request, const StagedTarget& target,
                Decision decision)
      : source_(std::move(source)), request_(request), target_(target), decision_(std::move(decision)) {}

  Result<std::unique_ptr<RouteWorker>> make_worker() override;
  const Decision& decision() const override { return decision_; }
  std::size_t tasks_per_take() const override { return is_read(request_.direction) ? std::max(1u, target_.pack) : 1; }
  std::shared_ptr<void> borrow_thread() override {
    return std::make_shared<ScopedDeviceContext>(*target_.api, target_.device);
  }

  std::shared_ptr<Source> source_;
  SourceRequest request_;
  StagedTarget target_;
  Decision decision_;
};

class StagedWorker final : public RouteWorker {
 public:
  StagedWorker(StagedBackend& backend, std::unique_ptr<StagingKit> kit)
      : s_(backend), kit_(std::move(kit)), pending_(kit_->buffers.size(), false) {}

  ~StagedWorker() override {
    // finish() normally returned the kit; if it could not (a failed sync), free it rather than reuse it.
    if (kit_) process_staging_pool().discard(std::move(kit_));
  }

  Result<std::uint64_t> run(const Task& t, Report& report) override {
    std::uint64_t done = 0;
    while (done < t.length) {
      // A worker's first reads are short and grow (256 KiB, 512 KiB, ... up to the bounce buffer): the GPU
      // copies nothing until some read has finished, and a timeline of 256 MiB requests on the H200 showed
      // the copy engine waiting for the first 1 MiB reads (bench/results/2026-11-30-h200-timeline). Small
      // pieces start it sooner; growing ones keep the copies large after that.
      std::uint64_t piece_size = kit_->buffer_size;
      if (is_read(s_.request_.direction) && s_.target_.ramp) {
        piece_size = std::min(piece_size, ramp_bytes_);
        ramp_bytes_ = std::min<std::uint64_t>(ramp_bytes_ * 2, kit_->buffer_size);
      }
      // O_DIRECT pieces must stay aligned: a shortened first piece keeps the alignment of the task.
      Task piece{t.file_offset + done, std::min(piece_size, t.length - done), t.buffer_offset + done, t.aligned};
      FERRY_ASSIGN_OR_RETURN(std::uint64_t n, is_read(s_.request_.direction) ? read_piece(piece, report) : write_piece(piece, report));
      done += n;
      if (n < piece.length) break;  // EOF
    }
    return done;
  }

  // Reads the tasks back to back into bounce buffers, one buffer after another, and copies each run of
  // them whose destinations follow one another with one copy.
  void run_batch(std::span<const Task> tasks, std::span<Report> reports,
                 std::span<Result<std::uint64_t>> results) override {
    if (tasks.empty()) return;
    // One buffer's reads at a time, so at most as many as fit in it (an allocation per growth otherwise).
    const std::uint64_t per_buffer = kit_->buffer_size / std::max<std::uint64_t>(1, tasks[0].length);
    reads_.reserve(std::min<std::size_t>(tasks.size(), per_buffer));
    std::size_t next = 0;
    while (next < tasks.size()) {
      if (tasks[next].length > kit_->buffer_size) {  // never packed: read in pieces as run() does
        results[next] = run(tasks[next], report_of(reports, next));
        ++next;
        continue;
      }
      const std::size_t first = next;
      if (Status marked = mark_last_copy(); !marked.ok()) {
        for (std::size_t i = first; i < tasks.size(); ++i) results[i] = marked;
        return;
      }
      std::size_t slot = next_slot_;
      next_slot_ = (next_slot_ + 1) % kit_->buffers.size();
      if (Status waited = wait_slot(slot); !waited.ok()) {
        for (std::size_t i = first; i < tasks.size(); ++i) results[i] = waited;
        return;
      }
      char* bounce = static_cast<char*>(kit_->buffers[slot]);
      reads_.clear();
      std::uint64_t used = 0;
      while (next < tasks.size() && used + tasks[next].length <= kit_->buffer_size) {
        reads_.push_back(TaskRead{tasks[next], bounce + used});
        used += tasks[next].length;
        ++next;
      }
      auto got = results.subspan(first, reads_.size());
      if (reports.size() > 1) {  // gathered reads: each task's counters are its own request's
        for (std::size_t i = 0; i < reads_.size(); ++i) {
          got[i] = s_.source_->read(s_.request_, reads_[i].task, reads_[i].dst, "staged", reports[first + i]);
        }
      } else {
        s_.source_->read_batch(s_.request_, reads_, "staged", reports[0], got);
      }
      copy_runs(got);
      Status recorded = cuda_check(*s_.target_.api, s_.target_.api->cuEventRecord(kit_->events[slot], kit_->stream),
                                   "cuEventRecord");
      if (!recorded.ok()) {
        for (auto& r : got) r = recorded;
        return;
      }
      pending_[slot] = true;
    }
  }

  Status resume() override { return make_current(*s_.target_.api, s_.target_.device); }

  // Asks the event behind the newest copy (recorded now if it was left unmarked): the buffer last used.
  bool finish_would_wait() override {
    if (!kit_ || std::find(pending_.begin(), pending_.end(), true) == pending_.end()) return false;
    if (!mark_last_copy().ok()) return false;  // finish() says what failed
    const std::size_t newest = (next_slot_ + kit_->buffers.size() - 1) % kit_->buffers.size();
    return s_.target_.api->cuEventQuery(kit_->events[newest]) == CUDA_ERROR_NOT_READY;
  }

  Status finish(Report& /*report*/) override {
    const CudaApi& api = *s_.target_.api;
    FERRY_RETURN_IF_ERROR(cuda_check(api, wait_for_stream(api, kit_->stream),
                                     [&] { return fmt::format("waiting for copies to GPU {}", s_.target_.device); }));
    unmarked_slot_.reset();  // the whole stream is done: no slot needs its own mark
    process_staging_pool().release(std::move(kit_));
    return Status();
  }

 private:
  // Waits until bounce buffer `slot` is no longer the source or target of a copy in flight.
  Status wait_slot(std::size_t slot) {
    if (!pending_[slot]) return Status();
    const CudaApi& api = *s_.target_.api;
    FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuEventSynchronize(kit_->events[slot]), "cuEventSynchronize"));
    pending_[slot] = false;
    return Status();
  }

  // The event after the newest copy is recorded when the next piece begins (nothing else was queued on
  // the stream in between, so it marks the same point), or never, when finish() waits for the whole
  // stream: a one-piece request, the common small read, records none.
  Status mark_last_copy() {
    if (!unmarked_slot_) return Status();
    const std::size_t slot = *unmarked_slot_;
    unmarked_slot_.reset();
    return cuda_check(*s_.target_.api, s_.target_.api->cuEventRecord(kit_->events[slot], kit_->stream),
                      "cuEventRecord");
  }

  Result<std::uint64_t> read_piece(const Task& piece, Report& report) {
    FERRY_RETURN_IF_ERROR(mark_last_copy());
    std::size_t slot = next_slot_;
    next_slot_ = (next_slot_ + 1) % kit_->buffers.size();
    FERRY_RETURN_IF_ERROR(wait_slot(slot));
    const char* bounce = static_cast<const char*>(kit_->buffers[slot]);
    FERRY_ASSIGN_OR_RETURN(std::uint64_t n, s_.source_->read(s_.request_, piece, kit_->buffers[slot], "staged", report));
    if (n == 0) return n;
    runs_.clear();
    s_.target_.destination.for_each_part(piece.buffer_offset, n, [&](std::uintptr_t address, std::uint64_t bytes,
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

  Result<std::uint64_t> write_piece(const Task& piece, Report& report) {
    const CudaApi& api = *s_.target_.api;
    void* bounce = kit_->buffers[0];
    const auto src = static_cast<CUdeviceptr>(s_.target_.destination.address(piece.buffer_offset));
    FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuMemcpyDtoHAsync_v2(bounce, src, piece.length, kit_->stream),
                                     [&] {
                                       return fmt::format("copying {} bytes from GPU {} for file offset {}",
                                                          piece.length, s_.target_.device, piece.file_offset);
                                     }));
    FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuStreamSynchronize(kit_->stream), "cuStreamSynchronize"));
    FERRY_RETURN_IF_ERROR(s_.source_->write(s_.request_, piece, bounce, "staged", report));
    return piece.length;
  }

  // Moves reads_ to the GPU: each run of them that lands contiguously and was read whole is one copy, and
  // the runs of one fill go to the driver in one call where it takes batched copies (pieces whose
  // destinations do not follow one another: one call, not one copy launch each). A failed copy fails the
  // tasks of its run, a failed batched copy those of every run.
  void copy_runs(std::span<Result<std::uint64_t>> got) {
    runs_.clear();
    const Destination& to = s_.target_.destination;
    std::size_t i = 0;
    while (i < reads_.size()) {
      if (!got[i].ok() || *got[i] == 0) {
        ++i;
        continue;
      }
      CopyRun run{static_cast<CUdeviceptr>(to.address(reads_[i].task.buffer_offset)),
                  static_cast<const char*>(reads_[i].dst), 0, i, i};
      bool whole = true;
      while (i < reads_.size() && whole && got[i].ok() && *got[i] > 0 &&
             to.address(reads_[i].task.buffer_offset) == run.dst + run.bytes &&
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
    const CudaApi& api = *s_.target_.api;
    if (runs_.size() > 1 && api.cuMemcpyBatchAsync_v2 != nullptr) {
      Status copied = copy_batched(api, what);
      if (!copied.ok()) {
        for (const CopyRun& run : runs_) failed(run, copied);
      }
      return;
    }
    for (const CopyRun& run : runs_) {
      Status copied = cuda_check(api, api.cuMemcpyHtoDAsync_v2(run.dst, run.src, run.bytes, kit_->stream), [&] {
        return fmt::format("copying {} bytes {} to GPU {}", run.bytes, what(), s_.target_.device);
      });
      if (!copied.ok()) failed(run, copied);
    }
  }

  template <typename What>
  Status copy_batched(const CudaApi& api, What&& what) {
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
    return cuda_check(api,
                      api.cuMemcpyBatchAsync_v2(batch_dsts_.data(), batch_srcs_.data(), batch_sizes_.data(),
                                                runs_.size(), &in_stream_order, &first_copy, 1, kit_->stream),
                      [&] {
                        return fmt::format("copying {} bytes {} to GPU {} in {} batched copies", bytes, what(),
                                           s_.target_.device, runs_.size());
                      });
  }

  static constexpr std::uint64_t kFirstPieceBytes = 256 << 10;
  std::vector<TaskRead> reads_;  // run_batch's pieces in the bounce buffer being filled
  // What queue_runs moves: `bytes` from `src` to `dst`; for copy_runs, pieces [begin, end) of reads_.
  struct CopyRun {
    CUdeviceptr dst;
    const char* src;
    std::uint64_t bytes;
    std::size_t begin, end;
  };
  std::vector<CopyRun> runs_;
  std::vector<CUdeviceptr> batch_dsts_, batch_srcs_;  // copy_batched's arguments, kept between fills
  std::vector<std::size_t> batch_sizes_;

  StagedBackend& s_;
  std::unique_ptr<StagingKit> kit_;
  std::vector<bool> pending_;
  std::optional<std::size_t> unmarked_slot_;  // pending, its event not recorded yet (mark_last_copy)
  std::size_t next_slot_ = 0;
  std::uint64_t ramp_bytes_ = kFirstPieceBytes;  // the size of the next piece while the pipeline fills
};

Result<std::unique_ptr<RouteWorker>> StagedBackend::make_worker() {
  const CudaApi& api = *target_.api;
  FERRY_RETURN_IF_ERROR(make_current(api, target_.device));
  FERRY_ASSIGN_OR_RETURN(auto kit, process_staging_pool().acquire(api, target_.device, target_.bounce_buffer_size,
                                                                  target_.buffers_per_worker));
  return std::unique_ptr<RouteWorker>(new StagedWorker(*this, std::move(kit)));
}

}  // namespace

std::shared_ptr<RouteBackend> make_staged_backend(std::shared_ptr<Source> source, const SourceRequest& request,
                                                  const StagedTarget& target, Decision decision) {
  return std::make_shared<StagedBackend>(std::move(source), request, target, std::move(decision));
}

}  // namespace ferry::detail
