// Report: per-route counters, reasons, and their human and JSON forms; the process-wide report.
#include <algorithm>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/fork_guard.hpp"
#include "ferry/config.hpp"
#include "ferry/route.hpp"
#include "report/cufile_counter_fields.hpp"
#include "report/json_text.hpp"
#include "report/process_report.hpp"

namespace ferry {

// Generated from the lists in ferry/route.hpp.
const char* route_name(Route r) noexcept {
  switch (r) {
#define FERRY_ROUTE_CASE_(enumerator, name) \
  case Route::enumerator: return name;
    FERRY_ROUTES(FERRY_ROUTE_CASE_)
#undef FERRY_ROUTE_CASE_
  }
  return "?";
}

const char* reason_name(Reason r) noexcept {
  switch (r) {
#define FERRY_REASON_NAME_CASE_(enumerator, text) \
  case Reason::enumerator: return #enumerator;
    FERRY_REASONS(FERRY_REASON_NAME_CASE_)
#undef FERRY_REASON_NAME_CASE_
  }
  return "?";
}

const char* reason_text(Reason r) noexcept {
  switch (r) {
#define FERRY_REASON_TEXT_CASE_(enumerator, text) \
  case Reason::enumerator: return text;
    FERRY_REASONS(FERRY_REASON_TEXT_CASE_)
#undef FERRY_REASON_TEXT_CASE_
  }
  return "?";
}

const char* stream_order_name(StreamOrder m) noexcept {
  switch (m) {
    case StreamOrder::stream_copies: return "stream_copies";
    case StreamOrder::stream_wait: return "stream_wait";
    case StreamOrder::synchronized: return "synchronized";
  }
  return "?";
}

std::uint64_t Report::total_ops() const {
  std::uint64_t n = 0;
  for (const auto& r : routes) n += r.ops;
  return n;
}

std::uint64_t Report::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& r : routes) n += r.bytes;
  return n;
}

namespace {

// Adds `ops` to the row of the same route, reason and detail, or appends a new row. The detail is copied
// only for a new row: count() runs once per task, and a detail is often a long sentence.
void add_reason(std::vector<ReasonCount>& reasons, Route route, Reason reason, const std::string& detail,
                std::uint64_t ops) {
  for (auto& rc : reasons) {
    if (rc.route == route && rc.reason == reason && rc.detail == detail) {
      rc.ops += ops;
      return;
    }
  }
  reasons.push_back(ReasonCount{route, reason, detail, ops});
}

}  // namespace

void Report::count(Route route, Reason reason, const std::string& detail, std::uint64_t bytes,
                   std::uint64_t nanoseconds, std::uint64_t ops) {
  auto& c = routes[static_cast<std::size_t>(route)];
  c.ops += ops;
  c.bytes += bytes;
  c.nanoseconds += nanoseconds;
  add_reason(reasons, route, reason, detail, ops);
}

void Report::add_note(const std::string& note) {
  if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
}

void Report::merge(const Report& other) {
  for (std::size_t i = 0; i < kRouteCount; ++i) {
    routes[i].ops += other.routes[i].ops;
    routes[i].bytes += other.routes[i].bytes;
    routes[i].nanoseconds += other.routes[i].nanoseconds;
  }
  for (const auto& rc : other.reasons) add_reason(reasons, rc.route, rc.reason, rc.detail, rc.ops);
  io.direct_ops += other.io.direct_ops;
  io.buffered_ops += other.io.buffered_ops;
  io.cached_ops += other.io.cached_ops;
  io.eintr_retries += other.io.eintr_retries;
  io.short_transfers += other.io.short_transfers;
  io.gathered_ops += other.io.gathered_ops;
  io.pinned_wait_ns += other.io.pinned_wait_ns;
  if (other.cufile) {
    CuFileCounters& c = cufile ? *cufile : cufile.emplace();
    const CuFileCounters& o = *other.cufile;
    for (const auto& f : detail::kCuFileCounterFields) c.*f.member += o.*f.member;
  }
  for (const auto& n : other.notes) add_note(n);
  for (std::size_t i = 0; i < kStreamOrderCount; ++i) stream_order[i] += other.stream_order[i];
}

namespace {

// "12.3 ms", "1.52 s".
std::string wait_text(std::uint64_t ns) {
  return ns >= 1000000000 ? fmt::format("{:.2f} s", static_cast<double>(ns) / 1e9)
                          : fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
}

std::string reason_phrase(const ReasonCount& rc) {
  std::string text = reason_text(rc.reason);
  if (!rc.detail.empty()) text += ": " + rc.detail;
  return text;
}

}  // namespace

std::string Report::summary() const {
  std::uint64_t ops = total_ops();
  std::string out = fmt::format("{} operation{}, {}", ops, ops == 1 ? "" : "s", format_size(total_bytes()));
  if (ops == 0) return out;
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < kRouteCount; ++i) {
    if (routes[i].ops == 0) continue;
    if (routes[i].ops == ops) {
      parts.push_back(fmt::format("all {}", route_name(static_cast<Route>(i))));
    } else {
      parts.push_back(fmt::format("{} {}", route_name(static_cast<Route>(i)), routes[i].ops));
    }
  }
  out += ", ";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  std::vector<std::string> why;
  for (const auto& rc : reasons) why.push_back(reason_phrase(rc));
  if (!why.empty()) {
    out += " (reason: ";
    for (std::size_t i = 0; i < why.size(); ++i) out += (i ? "; " : "") + why[i];
    out += ")";
  }
  if (io.pinned_wait_ns > 0) out += fmt::format(" (waited {} for pinned memory)", wait_text(io.pinned_wait_ns));
  if (cufile) {
    out += fmt::format(" [cuFile: nvfs={} p2p={} posix={}]", cufile->nvfs_reads + cufile->nvfs_writes,
                       cufile->p2p_reads + cufile->p2p_writes, cufile->posix_reads + cufile->posix_writes);
  }
  return out;
}

std::string Report::table() const {
  std::string out = fmt::format("{:<13} {:>10} {:>12} {:>10}  {}\n", "route", "ops", "bytes", "GiB/s*",
                                "reason");
  for (std::size_t i = 0; i < kRouteCount; ++i) {
    const auto& c = routes[i];
    if (c.ops == 0) continue;
    Route route = static_cast<Route>(i);
    // Per-task rate: bytes over summed task time, i.e. what one worker sustained.
    double rate = c.nanoseconds ? static_cast<double>(c.bytes) / static_cast<double>(c.nanoseconds) *
                                      1e9 / (1024.0 * 1024 * 1024)
                                : 0.0;
    bool first = true;
    for (const auto& rc : reasons) {
      if (rc.route != route) continue;
      if (first) {
        out += fmt::format("{:<13} {:>10} {:>12} {:>10.2f}  {} ({} op{})\n", route_name(route), c.ops,
                           format_size(c.bytes), rate, reason_phrase(rc), rc.ops, rc.ops == 1 ? "" : "s");
      } else {
        out += fmt::format("{:<13} {:>10} {:>12} {:>10}  {} ({} op{})\n", "", "", "", "", reason_phrase(rc),
                           rc.ops, rc.ops == 1 ? "" : "s");
      }
      first = false;
    }
    if (first) {
      out += fmt::format("{:<13} {:>10} {:>12} {:>10.2f}\n", route_name(route), c.ops, format_size(c.bytes),
                         rate);
    }
  }
  out += fmt::format("total         {:>10} {:>12}\n", total_ops(), format_size(total_bytes()));
  out += "* per worker: bytes over the summed time of that route's tasks\n";
  out += fmt::format("I/O: {} O_DIRECT, {} buffered ({} served from the page cache), {} EINTR/EAGAIN retries, "
                     "{} short transfers continued, {} taken with other requests\n",
                     io.direct_ops, io.buffered_ops, io.cached_ops, io.eintr_retries, io.short_transfers,
                     io.gathered_ops);
  if (io.pinned_wait_ns > 0) out += fmt::format("pinned memory: waited {} for room in pinned_budget\n", wait_text(io.pinned_wait_ns));
  if (cufile) {
    out += fmt::format("cuFile statistics: reads nvfs={} p2p={} posix={}; writes nvfs={} p2p={} posix={}; "
                       "errors read={} write={}\n",
                       cufile->nvfs_reads, cufile->p2p_reads, cufile->posix_reads, cufile->nvfs_writes,
                       cufile->p2p_writes, cufile->posix_writes, cufile->read_errors, cufile->write_errors);
  }
  std::string ordered;
  for (std::size_t i = 0; i < kStreamOrderCount; ++i) {
    if (stream_order[i] == 0) continue;
    ordered += fmt::format("{}{} {}", ordered.empty() ? "" : ", ", stream_order[i],
                           stream_order_name(static_cast<StreamOrder>(i)));
  }
  if (!ordered.empty()) out += "stream-ordered requests: " + ordered + "\n";
  for (const auto& n : notes) out += "note: " + n + "\n";
  return out;
}

std::string Report::to_json() const { return detail::json_dump(detail::report_json(*this)); }

nlohmann::json detail::report_json(const Report& report) {
  const auto& [routes, reasons, io, cufile, notes, stream_order] = report;  // every member: the JSON misses none
  nlohmann::json j;
  nlohmann::json r = nlohmann::json::object();
  for (std::size_t i = 0; i < kRouteCount; ++i) {
    const auto& c = routes[i];
    r[route_name(static_cast<Route>(i))] = {{"ops", c.ops}, {"bytes", c.bytes}, {"nanoseconds", c.nanoseconds}};
  }
  j["routes"] = r;
  j["reasons"] = nlohmann::json::array();
  for (const auto& rc : reasons) {
    j["reasons"].push_back({{"route", route_name(rc.route)},
                            {"reason", reason_name(rc.reason)},
                            {"text", reason_text(rc.reason)},
                            {"detail", rc.detail},
                            {"ops", rc.ops}});
  }
  j["io"] = {{"direct_ops", io.direct_ops},
             {"buffered_ops", io.buffered_ops},
             {"cached_ops", io.cached_ops},
             {"eintr_retries", io.eintr_retries},
             {"short_transfers", io.short_transfers},
             {"gathered_ops", io.gathered_ops},
             {"pinned_wait_ns", io.pinned_wait_ns}};
  if (cufile) {
    auto& counters = j["cufile"] = nlohmann::json::object();
    for (const auto& f : detail::kCuFileCounterFields) counters[f.name] = (*cufile).*f.member;
  } else {
    j["cufile"] = nullptr;
  }
  j["notes"] = notes;
  auto& ordered = j["stream_order"] = nlohmann::json::object();
  for (std::size_t i = 0; i < kStreamOrderCount; ++i) {
    ordered[stream_order_name(static_cast<StreamOrder>(i))] = stream_order[i];
  }
  j["total_ops"] = report.total_ops();
  j["total_bytes"] = report.total_bytes();
  j["summary"] = report.summary();
  return j;
}

std::string RoutePlan::to_string() const {
  std::string out = fmt::format("{}: {}", route_name(route), reason_text(reason));
  if (!detail.empty()) out += ": " + detail;
  return out;
}

namespace {
std::mutex g_process_mutex;
Report g_process_report;
const bool g_process_mutex_forks = (detail::hold_across_fork(g_process_mutex), true);  // every request takes it
}  // namespace

namespace detail {
void add_to_process_report(const Report& report) {
  std::lock_guard<std::mutex> lock(g_process_mutex);
  g_process_report.merge(report);
}
}  // namespace detail

Report process_report() {
  std::lock_guard<std::mutex> lock(g_process_mutex);
  return g_process_report;
}

void reset_process_report() {
  std::lock_guard<std::mutex> lock(g_process_mutex);
  g_process_report = Report{};
}

}  // namespace ferry
