// cuFile workers and the statistics-based attribution of their operations.
#include "backends/gds_backend.hpp"

#include <atomic>

#include <fmt/format.h>

#include "platform/cuda/primary_context.hpp"
#include "route/router.hpp"

namespace ferry::detail {
namespace {

// cuFile's statistics are per process: count overlapping cuFile requests so a report can say when its
// attribution was shared with others.
std::atomic<int> g_cufile_requests_in_flight{0};

class GdsSource final : public TaskSource {
 public:
  GdsSource(bool is_read, GdsTarget target, Decision decision, std::shared_ptr<TaskSource> edges)
      : is_read_(is_read), target_(std::move(target)), decision_(std::move(decision)), edges_(std::move(edges)) {
    // cuFile does not order its DMA after work the caller queued on the legacy default stream (a memset
    // of the destination, say); wait for that work first, as the staged route's blocking streams do.
    // This runs on the caller's thread: leave its current context as it was.
    ScopedDeviceContext context(*target_.cuda, target_.device);
    if (context.status().ok()) (void)target_.cuda->cuStreamSynchronize(nullptr);
    before_ = target_.driver->stats_snapshot(target_.device);
    int now = g_cufile_requests_in_flight.fetch_add(1) + 1;
    max_concurrent_.store(now);
  }

  Result<std::unique_ptr<TaskWorker>> make_worker() override {
    FERRY_RETURN_IF_ERROR(make_current(*target_.cuda, target_.device));
    int now = g_cufile_requests_in_flight.load();
    int seen = max_concurrent_.load();
    while (now > seen && !max_concurrent_.compare_exchange_weak(seen, now)) {
    }
    return std::unique_ptr<TaskWorker>(new Worker(*this));
  }
  const Decision& decision() const override { return decision_; }
  const Decision& decision_for(const Task& t) const override {
    return edges_ && !t.aligned ? edges_->decision() : decision_;
  }

  Status finish_request(Report& report, Status status) override {
    g_cufile_requests_in_flight.fetch_sub(1);
    auto after = target_.driver->stats_snapshot(target_.device);
    if (before_ && after) {
      attribute_by_cufile_stats(report, cufile_counters_delta(*before_, *after), is_read_);
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
  class Worker final : public TaskWorker {
   public:
    explicit Worker(GdsSource& s) : s_(s) {}
    Result<std::uint64_t> run(const Task& t, Report& report) override {
      if (s_.edges_ && !t.aligned) {
        if (!edge_worker_) {
          FERRY_ASSIGN_OR_RETURN(edge_worker_, s_.edges_->make_worker());
        }
        return edge_worker_->run(t, report);
      }
      const GdsTarget& g = s_.target_;
      std::uint64_t done = 0;
      while (done < t.length) {
        off_t file_offset = static_cast<off_t>(t.file_offset + done);
        off_t buffer_offset = static_cast<off_t>(t.buffer_offset + done);
        Result<std::size_t> n = s_.is_read_
            ? g.driver->read(g.handle->get(), g.base, t.length - done, file_offset, buffer_offset, g.path)
            : g.driver->write(g.handle->get(), g.base, t.length - done, file_offset, buffer_offset, g.path);
        if (!n.ok()) return n.status();
        if (*n == 0) {
          if (s_.is_read_) break;  // EOF
          return Status(ErrorCode::io_error,
                        fmt::format("cuFileWrite wrote nothing at offset {} of \"{}\"", file_offset, g.path), EIO,
                        g.path);
        }
        done += *n;
      }
      return done;
    }

    Status finish(Report& report) override { return edge_worker_ ? edge_worker_->finish(report) : Status(); }

   private:
    GdsSource& s_;
    std::unique_ptr<TaskWorker> edge_worker_;  // made on the first edge task this worker meets
  };

  bool is_read_;
  GdsTarget target_;
  Decision decision_;
  std::shared_ptr<TaskSource> edges_;
  std::optional<CuFileCounters> before_;
  std::atomic<int> max_concurrent_{1};
};

}  // namespace

void attribute_by_cufile_stats(Report& report, const CuFileCounters& delta, bool is_read) {
  report.cufile = delta;
  const std::uint64_t kinds[3] = {
      is_read ? delta.nvfs_reads : delta.nvfs_writes,
      is_read ? delta.p2p_reads : delta.p2p_writes,
      is_read ? delta.posix_reads : delta.posix_writes,
  };
  const Route routes[3] = {Route::nvfs, Route::p2p, Route::cufile_posix};
  const std::uint64_t counted = kinds[0] + kinds[1] + kinds[2];

  // Gather what was counted provisionally under any cuFile route.
  RouteCounters total;
  std::vector<ReasonCount> cufile_reasons;
  for (Route r : routes) {
    auto& c = report.routes[static_cast<std::size_t>(r)];
    total.ops += c.ops;
    total.bytes += c.bytes;
    total.nanoseconds += c.nanoseconds;
  }
  if (total.ops == 0) return;
  if (counted == 0) {
    report.add_note("cuFile's statistics counted none of this request's operations: the route shown is "
                    "provisional");
    return;
  }
  for (auto it = report.reasons.begin(); it != report.reasons.end();) {
    if (is_cufile_route(it->route)) {
      cufile_reasons.push_back(*it);
      it = report.reasons.erase(it);
    } else {
      ++it;
    }
  }
  // Largest-remainder split of the operations; bytes and time follow the operations.
  std::uint64_t assigned = 0;
  std::uint64_t share[3];
  for (int i = 0; i < 3; ++i) {
    share[i] = total.ops * kinds[i] / counted;
    assigned += share[i];
  }
  for (int i = 0; assigned < total.ops; i = (i + 1) % 3) {
    if (kinds[i] > 0) {
      ++share[i];
      ++assigned;
    }
  }
  const std::string detail_suffix = fmt::format("cuFile counted nvfs={} p2p={} posix={}", kinds[0], kinds[1], kinds[2]);
  const ReasonCount base = cufile_reasons.empty() ? ReasonCount{Route::cufile_posix, Reason::cufile_stats, "", 0}
                                                  : cufile_reasons.front();
  for (int i = 0; i < 3; ++i) {
    auto& c = report.routes[static_cast<std::size_t>(routes[i])];
    c.ops = share[i];
    c.bytes = total.ops ? total.bytes * share[i] / total.ops : 0;
    c.nanoseconds = total.ops ? total.nanoseconds * share[i] / total.ops : 0;
    if (share[i] == 0) continue;
    std::string detail = base.detail.empty() ? detail_suffix : base.detail + "; " + detail_suffix;
    report.reasons.push_back(ReasonCount{routes[i], base.reason, detail, share[i]});
  }
  // Integer division may leave a few bytes unassigned: give them to the largest share.
  std::uint64_t bytes_now = 0;
  for (Route r : routes) bytes_now += report.routes[static_cast<std::size_t>(r)].bytes;
  int largest = share[0] >= share[1] && share[0] >= share[2] ? 0 : share[1] >= share[2] ? 1 : 2;
  report.routes[static_cast<std::size_t>(routes[largest])].bytes += total.bytes - bytes_now;
}

std::shared_ptr<TaskSource> make_gds_source(bool is_read, GdsTarget target, Decision decision,
                                            std::shared_ptr<TaskSource> edges) {
  return std::make_shared<GdsSource>(is_read, std::move(target), std::move(decision), std::move(edges));
}

}  // namespace ferry::detail
