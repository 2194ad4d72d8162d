// Host route workers: no resources of their own; an op (or several, where the source keeps them in flight
// together) goes straight between the source and the caller's buffer.
#include "backends/host_backend.hpp"

#include <algorithm>
#include <vector>

namespace ferry::detail {
namespace {

class HostBackend final : public RouteBackend {
 public:
  HostBackend(Source* source, const SourceRequest& request, Destination destination,
              Decision decision)
      : RouteBackend(request, std::move(destination), std::move(decision), source, /*shares_workers=*/true) {}

  Result<std::unique_ptr<RouteWorker>> make_worker(const WorkerWait& /*wait*/) override {
    return std::unique_ptr<RouteWorker>(new Worker(source()));
  }
  std::size_t ops_together() const override {
    return is_read(source_request().direction) ? std::max<std::size_t>(1, source()->queue_depth()) : 1;
  }

 private:
  class Worker final : public RouteWorker {
   public:
    explicit Worker(Source* source) : source_(source) {}

    void run(std::span<const Op> ops, std::span<Report> reports, std::span<Result<std::uint64_t>> results) override {
      // Reads of one request into one buffer go to the source together (an io_uring source keeps them in
      // flight at once); anything else an op at a time, with its own request's view and counters, and none
      // of a request that was stopped or whose op failed just before.
      const RouteBackend* request = ops.empty() ? nullptr : ops[0].request;
      const bool together = ops.size() > 1 && reports.size() == 1 && is_read(request->source_request().direction) &&
                            !request->destination().is_scattered() &&
                            std::all_of(ops.begin(), ops.end(), [&](const Op& op) { return op.request == request; });
      if (!together) {
        const RouteBackend* failed = nullptr;
        for (std::size_t i = 0; i < ops.size(); ++i) {
          const auto& stop = ops[i].request->source_request().stop;
          if (ops[i].request == failed || (stop && stop->load(std::memory_order_acquire))) {
            results[i] = Status(ErrorCode::cancelled, "the request was cancelled");
            continue;
          }
          results[i] = run_one(ops[i], report_of(reports, i));
          if (!results[i].ok()) failed = ops[i].request;
        }
        return;
      }
      reads_.clear();
      for (const Op& op : ops) reads_.push_back({op.task, at(op)});
      source_->read_batch(request->source_request(), reads_, "host", reports[0], results);
    }

   private:
    // Where an op's bytes are (its own address for a batch's piece, whose destination has base 0).
    static char* at(const Op& op) {
      return reinterpret_cast<char*>(op.request->destination().address(op.task.buffer_offset));
    }

    Result<std::uint64_t> run_one(const Op& op, Report& report) {
      const Task& t = op.task;
      const SourceRequest& request = op.request->source_request();
      const Destination& destination = op.request->destination();
      if (!destination.contiguous(t.buffer_offset, t.length)) {
        parts_.clear();
        destination.for_each_part(t.buffer_offset, t.length, [&](std::uintptr_t address, std::uint64_t n, std::uint64_t) {
          parts_.push_back(MemoryPart{reinterpret_cast<void*>(address), n});
        });
        return source_->read_parts(request, t, parts_, "host", report);
      }
      if (is_read(request.direction)) return source_->read(request, t, at(op), "host", report);
      FERRY_RETURN_IF_ERROR(source_->write(request, t, at(op), "host", report));
      return t.length;
    }

    Source* source_;  // the File's: every op it runs holds a use of that File
    std::vector<TaskRead> reads_;
    std::vector<MemoryPart> parts_;  // the parts of an op that spans several buffers
  };
};

}  // namespace

std::shared_ptr<RouteBackend> make_host_backend(Source* source, const SourceRequest& request,
                                                Destination destination, Decision decision) {
  return std::make_shared<HostBackend>(source, request, std::move(destination), std::move(decision));
}

}  // namespace ferry::detail
