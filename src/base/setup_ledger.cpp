// The ledger behind process_setup_costs(), and the words for it.
#include "base/setup_ledger.hpp"

#include <atomic>
#include <iterator>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ferry {
namespace {
constexpr std::size_t kSteps = std::tuple_size_v<decltype(SetupCosts::steps)>;
}  // namespace

namespace detail {
namespace {

struct Ledger {
  std::atomic<std::uint64_t> records{0};  // pieces recorded: counted after their sums
  std::atomic<std::uint64_t> ns[kSteps] = {};
  std::atomic<std::uint64_t> count[kSteps] = {};
  std::atomic<std::uint64_t> bytes[kSteps] = {};
};

// Constant-initialised (no first-use guard to be copied held by a fork) and trivially destroyed, so workers may
// record during exit.
constinit Ledger g_ledger;

Ledger& ledger() { return g_ledger; }

}  // namespace

void record_setup(SetupStep step, std::chrono::nanoseconds elapsed, std::uint64_t count, std::uint64_t bytes) {
  const auto i = static_cast<std::size_t>(step);
  ledger().ns[i] += static_cast<std::uint64_t>(elapsed.count());
  ledger().count[i] += count;
  ledger().bytes[i] += bytes;
  ledger().records.fetch_add(1, std::memory_order_release);
}

}  // namespace detail

namespace {

const char* const kStepNames[] = {"cuda_init", "cuda_context", "cufile_load", "cufile_driver_open",
                                  "cufile_register", "pinned_buffers", "threads"};
const char* const kStepWords[] = {"CUDA loaded and initialised", "GPU context(s) retained", "cuFile loaded",
                                  "cuFile's driver opened", "file(s) registered with cuFile",
                                  "pinned bounce buffers", "worker threads started"};
static_assert(std::size(kStepNames) == kSteps && std::size(kStepWords) == kSteps, "one name per SetupStep");

}  // namespace

SetupCosts process_setup_costs() {
  SetupCosts c;
  const detail::Ledger& ledger = detail::ledger();  // every request asks: one guarded static, not one a field
  for (std::size_t i = 0; i < kSteps; ++i) {
    c.steps[i].seconds = static_cast<double>(ledger.ns[i].load(std::memory_order_relaxed)) / 1e9;
    c.steps[i].count = ledger.count[i].load(std::memory_order_relaxed);
    c.steps[i].bytes = ledger.bytes[i].load(std::memory_order_relaxed);
  }
  return c;
}

SetupCosts SetupCosts::since(const SetupCosts& earlier) const {
  SetupCosts d;
  for (std::size_t i = 0; i < kSteps; ++i) {
    d.steps[i].seconds = steps[i].seconds - earlier.steps[i].seconds;
    d.steps[i].count = steps[i].count - earlier.steps[i].count;
    d.steps[i].bytes = steps[i].bytes - earlier.steps[i].bytes;
  }
  return d;
}

double SetupCosts::total_seconds() const {
  double t = 0;
  for (const auto& s : steps) t += s.seconds;
  return t;
}

bool SetupCosts::empty() const {
  for (const auto& s : steps) {
    if (s.count) return false;
  }
  return true;
}

std::string SetupCosts::summary() const {
  std::string out;
  for (std::size_t i = 0; i < kSteps; ++i) {
    if (steps[i].count == 0) continue;
    out += out.empty() ? "" : "; ";
    out += fmt::format("{} {:.1f} ms", kStepWords[i], steps[i].seconds * 1e3);
    if (steps[i].count > 1 || steps[i].bytes) {
      out += fmt::format(" ({}{})", steps[i].count,
                         steps[i].bytes ? fmt::format(", {:.0f} MiB", static_cast<double>(steps[i].bytes) / (1 << 20)) : "");
    }
  }
  return out;
}

std::string SetupCosts::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t i = 0; i < kSteps; ++i) {
    j[kStepNames[i]] = {{"seconds", steps[i].seconds}, {"count", steps[i].count}, {"bytes", steps[i].bytes}};
  }
  j["total_seconds"] = total_seconds();
  return j.dump();
}

detail::SetupMark detail::setup_mark() {
  static constinit std::atomic<const SetupSnapshot*> latest{nullptr};
  // The count first: a piece recorded between the two is in the sums, and its count shows it as new at the
  // end (since() then leaves it out), rather than hidden in the count and missing from the sums.
  const std::uint64_t records = ledger().records.load(std::memory_order_acquire);
  const SetupSnapshot* seen = latest.load(std::memory_order_acquire);
  if (seen != nullptr && seen->records == records) return seen;
  const auto* made = new SetupSnapshot{records, process_setup_costs()};
  latest.store(made, std::memory_order_release);
  return made;
}

std::string detail::setup_note_since(const SetupMark& before) {
  if (ledger().records.load(std::memory_order_acquire) == before->records) return {};
  const SetupCosts setup = process_setup_costs().since(before->costs);
  return setup.empty() ? std::string() : "one-time set-up during this request: " + setup.summary();
}

}  // namespace ferry
