// Host route workers: no per-thread resources; a task (or a batch of them, where the source keeps several
// in flight) goes straight between the source and the caller's buffer.
#include "backends/host_backend.hpp"

#include <algorithm>
#include <vector>

namespace ferry::detail {
namespace {

class HostBackend final : public RouteBackend {
 public:
  HostBackend(std::shared_ptr<Source> source, const SourceRequest& request, Destination destination,
              Decision decision, unsigned pack)
      : source_(std::move(source)), request_(request), destination_(std::move(destination)),
        decision_(std::move(decision)), pack_(pack) {}

  Result<std::unique_ptr<RouteWorker>> make_worker() override {
    return std::unique_ptr<RouteWorker>(new Worker(*this));
  }
  const Decision& decision() const override { return decision_; }
  std::size_t tasks_per_take() const override {
    return is_read(request_.direction) ? std::max<std::size_t>(source_->queue_depth(), pack_) : 1;
  }

 private:
  class Worker final : public RouteWorker {
   public:
    explicit Worker(HostBackend& backend) : b_(backend) {}
    Result<std::uint64_t> run(const Task& t, Report& report) override {
      if (!b_.destination_.contiguous(t.buffer_offset, t.length)) {
        parts_.clear();
        b_.destination_.for_each_part(t.buffer_offset, t.length, [&](std::uintptr_t address, std::uint64_t n, std::uint64_t) {
          parts_.push_back(MemoryPart{reinterpret_cast<void*>(address), n});
        });
        return b_.source_->read_parts(b_.request_, t, parts_, "host", report);
      }
      char* at = b_.at(t);
      if (is_read(b_.request_.direction)) return b_.source_->read(b_.request_, t, at, "host", report);
      FERRY_RETURN_IF_ERROR(b_.source_->write(b_.request_, t, at, "host", report));
      return t.length;
    }
    void run_batch(std::span<const Task> tasks, std::span<Report> reports,
                   std::span<Result<std::uint64_t>> results) override {
      // Gathered reads (each task's counters are its own request's), and scattered reads (a task may span
      // several buffers): a task at a time.
      if (reports.size() > 1 || b_.destination_.is_scattered()) {
        for (std::size_t i = 0; i < tasks.size(); ++i) results[i] = run(tasks[i], report_of(reports, i));
        return;
      }
      std::vector<TaskRead> reads;
      reads.reserve(tasks.size());
      for (const Task& t : tasks) reads.push_back({t, b_.at(t)});
      b_.source_->read_batch(b_.request_, reads, "host", reports[0], results);
    }

   private:
    HostBackend& b_;
    std::vector<MemoryPart> parts_;  // run()'s parts of a task that spans several buffers
  };

  // Where a task's bytes go (its own address for a batch's piece, whose destination has base 0).
  char* at(const Task& t) const { return reinterpret_cast<char*>(destination_.address(t.buffer_offset)); }

  std::shared_ptr<Source> source_;
  SourceRequest request_;
  Destination destination_;  // only scattered reads span several buffers
  Decision decision_;
  unsigned pack_;
};

}  // namespace

std::shared_ptr<RouteBackend> make_host_backend(std::shared_ptr<Source> source, const SourceRequest& request,
                                                Destination destination, Decision decision, unsigned pack) {
  return std::make_shared<HostBackend>(std::move(source), request, std::move(destination), std::move(decision), pack);
}

}  // namespace ferry::detail
