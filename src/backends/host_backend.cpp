// Host route workers: no per-thread resources; a task (or a batch of them, where the source keeps several
// in flight) goes straight between the source and the caller's buffer.
#include "backends/host_backend.hpp"

#include <algorithm>

namespace ferry::detail {
namespace {

class HostBackend final : public RouteBackend {
 public:
  HostBackend(std::shared_ptr<Source> source, const SourceRequest& request, void* buffer, Decision decision,
              unsigned pack)
      : source_(std::move(source)), request_(request), base_(reinterpret_cast<std::uintptr_t>(buffer)),
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
      char* at = b_.at(t);
      if (is_read(b_.request_.direction)) return b_.source_->read(b_.request_, t, at, "host", report);
      FERRY_RETURN_IF_ERROR(b_.source_->write(b_.request_, t, at, "host", report));
      return t.length;
    }
    void run_batch(std::span<const Task> tasks, std::span<Report> reports,
                   std::span<Result<std::uint64_t>> results) override {
      if (reports.size() > 1) {  // gathered reads: each task's counters are its own request's
        for (std::size_t i = 0; i < tasks.size(); ++i) results[i] = run(tasks[i], reports[i]);
        return;
      }
      std::vector<TaskRead> reads;
      reads.reserve(tasks.size());
      for (const Task& t : tasks) reads.push_back({t, b_.at(t)});
      b_.source_->read_batch(b_.request_, reads, "host", reports[0], results);
    }

   private:
    HostBackend& b_;
  };

  // Where a task's bytes go: its offset from the caller's buffer (from address 0 for a batch, whose tasks
  // carry their pieces' addresses).
  char* at(const Task& t) const { return reinterpret_cast<char*>(base_ + t.buffer_offset); }

  std::shared_ptr<Source> source_;
  SourceRequest request_;
  std::uintptr_t base_;
  Decision decision_;
  unsigned pack_;
};

}  // namespace

std::shared_ptr<RouteBackend> make_host_backend(std::shared_ptr<Source> source, const SourceRequest& request,
                                                void* buffer, Decision decision, unsigned pack) {
  return std::make_shared<HostBackend>(std::move(source), request, buffer, std::move(decision), pack);
}

}  // namespace ferry::detail
