// attribute_by_cufile_stats: cuFile's statistics decide which of its routes each operation took.
#include "report/cufile_attribution.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "base/decision.hpp"

namespace ferry::detail {

void attribute_by_cufile_stats(Report& report, const CuFileCounters& delta, Direction direction) {
  const bool reads = is_read(direction);
  report.cufile = delta;
  const std::uint64_t kinds[3] = {
      reads ? delta.nvfs_reads : delta.nvfs_writes,
      reads ? delta.p2p_reads : delta.p2p_writes,
      reads ? delta.posix_reads : delta.posix_writes,
  };
  const Route routes[3] = {Route::nvfs, Route::p2p, Route::cufile_posix};
  const std::uint64_t counted = kinds[0] + kinds[1] + kinds[2];

  // Gather what was counted provisionally under any cuFile route.
  RouteCounters total;
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
  // The split keeps the reason of the first provisional count.
  const auto first = std::find_if(report.reasons.begin(), report.reasons.end(),
                                  [](const ReasonCount& r) { return is_cufile_route(r.route); });
  const ReasonCount base = first == report.reasons.end() ? ReasonCount{Route::cufile_posix, Reason::cufile_stats, "", 0}
                                                         : *first;
  std::erase_if(report.reasons, [](const ReasonCount& r) { return is_cufile_route(r.route); });
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
  const std::string counts = fmt::format("cuFile counted nvfs={} p2p={} posix={}", kinds[0], kinds[1], kinds[2]);
  const std::string detail = base.detail.empty() ? counts : base.detail + "; " + counts;
  std::uint64_t bytes_now = 0;
  for (int i = 0; i < 3; ++i) {
    auto& c = report.routes[static_cast<std::size_t>(routes[i])];
    c.ops = share[i];
    c.bytes = total.bytes * share[i] / total.ops;
    bytes_now += c.bytes;
    c.nanoseconds = total.nanoseconds * share[i] / total.ops;
    if (share[i] > 0) report.reasons.push_back(ReasonCount{routes[i], base.reason, detail, share[i]});
  }
  // Integer division may leave a few bytes unassigned: give them to the largest share (the first of equals).
  const auto largest = std::max_element(share, share + 3) - share;
  report.routes[static_cast<std::size_t>(routes[largest])].bytes += total.bytes - bytes_now;
}

}  // namespace ferry::detail
