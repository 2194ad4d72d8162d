// The tools' progress display: see cli/support/progress.hpp.
#include "cli/support/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>

#include <fmt/format.h>

#include "base/timing.hpp"

namespace ferry::cli {

TerminalProgress::TerminalProgress(bool enabled, double delay_seconds)
    : enabled_(enabled),
      terminal_(::isatty(STDERR_FILENO) == 1),
      show_after_ns_(detail::now_ns() + static_cast<std::uint64_t>(delay_seconds * 1e9)) {}

TerminalProgress::~TerminalProgress() { clear(); }

void TerminalProgress::transient(const std::string& line) {
  if (!enabled_ || !terminal_ || detail::now_ns() < show_after_ns_) return;
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void TerminalProgress::line(const std::string& line) {
  if (!enabled_) return;
  clear();
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void TerminalProgress::clear() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

std::string amount_text(const char* verb, std::uint64_t done, std::uint64_t total) {
  return fmt::format("{} {} of {} ({:.0f}%)", verb, format_size(done), format_size(total),
                     total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0);
}

void wait_with_progress(const Future& future, const char* verb, std::uint64_t total) {
  TerminalProgress progress(true, 1.0);
  if (!progress.terminal()) return future.wait();
  while (!future.wait_for(std::chrono::milliseconds(250))) progress.transient(amount_text(verb, future.bytes_done(), total));
}

void run_with_progress(const std::function<void()>& work, const std::atomic<std::uint64_t>& done, const char* verb,
                       std::uint64_t total) {
  std::future<void> running = std::async(std::launch::async, work);
  TerminalProgress progress(true, 1.0);
  while (running.wait_for(std::chrono::milliseconds(250)) != std::future_status::ready) {
    progress.transient(amount_text(verb, done.load(std::memory_order_relaxed), total));
  }
  running.get();
}

}  // namespace ferry::cli
