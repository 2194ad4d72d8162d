// cuFile workers: reads and writes through cuFile, unaligned edges bounced, statistics read around them.
#include "backends/gds_backend.hpp"

#include <atomic>

#include <fmt/format.h>

#include "base/atomic_max.hpp"
#include "base/decision.hpp"
#include "platform/cuda/primary_context.hpp"
#include "report/cufile_attribution.hpp"

namespace ferry::detail {
namespace {

// cuFile's statistics are per process: count overlapping cuFile requests so a report can say when its
// attribution was shared with others.
std::atomic<int> g_cufile_requests_in_flight{0};

class GdsBackend final : public RouteBackend {
 public:
  GdsBackend(const SourceRequest& request, GdsTarget target, Decision decision, std::shared_ptr<RouteBackend> edges)
      : RouteBackend(request, std::move(target.destination), std::move(decision), nullptr, /*shares_workers=*/false),
        target_(std::move(target)),
        edges_(std::move(edges)) {
    // cuFile does not order its DMA after work the caller queued on the legacy default stream (a memset
    // of the destination, say); wait for that work first, as the staged route's blocking streams do.
    // This runs on the caller's thread: leave its current context as it was.
    ScopedDeviceContext context(*target_.cuda, target_.device);
    if (context.status().ok()) (void)target_.cuda->cuStreamSynchronize(nullptr);
    before_ = target_.driver->stats_snapshot(target_.device);
    max_concurrent_.store(g_cufile_requests_in_flight.fetch_add(1) + 1);
  }

  Result<std::unique_ptr<RouteWorker>> make_worker(const WorkerWait& wait) override {
    FERRY_RETURN_IF_ERROR(make_current(*target_.cuda, target_.device));
    // The unaligned edges' bounce buffers are taken now, never in the middle of a take: a worker that waited
    // for pinned memory there would hold a pool thread (and its ops) meanwhile.
    std::unique_ptr<RouteWorker> edges;
    if (edges_) {
      FERRY_ASSIGN_OR_RETURN(edges, edges_->make_worker(wait));
      if (!edges) return std::unique_ptr<RouteWorker>();
    }
    raise_to_max(max_concurrent_, g_cufile_requests_in_flight.load());
    return std::unique_ptr<RouteWorker>(new Worker(*this, std::move(edges)));
  }
  void let_go() override {
    target_.handle.reset();  // the registration: close() deregisters before the descriptor's number is reused
    if (edges_) edges_->let_go();
  }
  std::shared_ptr<void> borrow_thread() override {
    return std::make_shared<ScopedDeviceContext>(*target_.cuda, target_.device);
  }
  const Decision& decision_for(const Task& t) const override {
    return edges_ && !t.aligned ? edges_->decision() : decision();
  }

  Status finish_request(Report& report, Status status) override {
    g_cufile_requests_in_flight.fetch_sub(1);
    auto after = target_.driver->stats_snapshot(target_.device);
    if (before_ && after) {
      attribute_by_cufile_stats(report, cufile_counters_delta(*before_, *after), source_request().direction);
      if (max_concurrent_.load() > 1) {
        report.add_note("other cuFile requests ran at the same time: cuFile's statistics are per process, so "
                        "the split between nvfs, p2p and cufile-posix is shared with them");
      }
    } else {
      report.add_note(fmt::format("cuFile statistics unavailable ({}): the route is inferred from cuFile's "
                                  "driver properties, not proven",
                                  target_.driver->stats_status().ok() ? "cuFileGetStatsL3 failed"
                                                                      : target_.driver->stats_status().message()));
    }
    if (destination().is_scattered()) {
      report.add_note(fmt::format("cuFile reads into one buffer at a time: each of the {} buffers of this read "
                                  "was read on its own",
                                  destination().segments().size()));
    }
    if (!status.ok() || target_.require != Requirement::gds) return status;
    const auto& posix = report.at(Route::cufile_posix);
    if (!after || !before_ || posix.ops > 0) {
      return Status(ErrorCode::failed_precondition,
                    fmt::format("require=gds: {} of {} operations on \"{}\" did not take the direct route "
                                "according to cuFile's statistics ({})",
                                !after || !before_ ? report.total_ops() : posix.ops, report.total_ops(),
                                target_.path,
                                report.cufile ? cufile_counters_text(*report.cufile) : "statistics unavailable"),
                    0, target_.path);
    }
    return status;
  }

 private:
  class Worker final : public RouteWorker {
   public:
    Worker(GdsBackend& s, std::unique_ptr<RouteWorker> edges) : s_(s), edge_worker_(std::move(edges)) {}
    void run(std::span<const Op> ops, std::span<Report> reports, std::span<Result<std::uint64_t>> results) override {
      for (std::size_t i = 0; i < ops.size(); ++i) results[i] = run_one(ops[i].task, report_of(reports, i));
    }
    std::uint64_t last_fill() const override { return edge_worker_ ? edge_worker_->last_fill() : 0; }
    bool landed(std::uint64_t fill) override { return !edge_worker_ || edge_worker_->landed(fill); }
    Status wait_landed(std::uint64_t fill) override { return edge_worker_ ? edge_worker_->wait_landed(fill) : Status(); }
    Status finish() override { return edge_worker_ ? edge_worker_->finish() : Status(); }
    bool holds_pinned() const override { return edge_worker_ && edge_worker_->holds_pinned(); }

   private:
    Result<std::uint64_t> run_one(const Task& t, Report& report) {
      if (s_.edges_ && !t.aligned) {
        const Op edge{t, s_.edges_.get()};
        Result<std::uint64_t> got(std::uint64_t{0});
        edge_worker_->run({&edge, 1}, {&report, 1}, {&got, 1});
        return got;
      }
      const GdsTarget& g = s_.target_;
      // The task's buffer, and the task's offset in it (cuFile takes a base and an offset from it).
      const bool scattered = s_.destination().is_scattered();
      void* base = reinterpret_cast<void*>(s_.destination().address(scattered ? t.buffer_offset : 0));
      const std::uint64_t task_offset = scattered ? 0 : t.buffer_offset;
      const bool reading = is_read(s_.source_request().direction);
      std::uint64_t done = 0;
      while (done < t.length) {
        off_t file_offset = static_cast<off_t>(t.file_offset + done);
        off_t buffer_offset = static_cast<off_t>(task_offset + done);
        Result<std::size_t> n = reading
            ? g.driver->read(g.handle->get(), base, t.length - done, file_offset, buffer_offset, g.path)
            : g.driver->write(g.handle->get(), base, t.length - done, file_offset, buffer_offset, g.path);
        if (!n.ok()) return n.status();
        if (*n == 0) {
          if (reading) break;  // EOF
          return Status(ErrorCode::io_error,
                        fmt::format("cuFileWrite wrote nothing at offset {} of \"{}\"", file_offset, g.path), EIO,
                        g.path);
        }
        done += *n;
      }
      return done;
    }

    GdsBackend& s_;
    std::unique_ptr<RouteWorker> edge_worker_;  // for the unaligned edges, when the request has them
  };

  GdsTarget target_;
  std::shared_ptr<RouteBackend> edges_;
  std::optional<CuFileCounters> before_;
  std::atomic<int> max_concurrent_{1};
};

}  // namespace

std::shared_ptr<RouteBackend> make_gds_backend(const SourceRequest& request, GdsTarget target, Decision decision,
                                               std::shared_ptr<RouteBackend> edges) {
  return std::make_shared<GdsBackend>(request, std::move(target), std::move(decision), std::move(edges));
}

}  // namespace ferry::detail
