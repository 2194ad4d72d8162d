// cli/support/progress.hpp: the one progress display of Ferry's tools, on stderr.
//
// Part of cli/support (its CMakeLists.txt says who links it). On a terminal, a transient line is
// rewritten in place ("\r" and erase to the end of the line), and cleared before anything else is printed
// and at the end; elsewhere (a pipe, a log file) transient lines are not printed at all, so that logs hold
// only finished steps. `ferry read`, `write` and `load` show the bytes done of a long request (and `write`
// those of the data it generates first); the benchmark
// shows each run and prints each finished measurement.
// Thread safety: one TerminalProgress per thread; the functions below wait on their own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "ferry/config.hpp"
#include "ferry/file.hpp"

namespace ferry::cli {

class TerminalProgress {
 public:
  /// `enabled` false: nothing is printed at all. Transient lines appear only once `delay_seconds` have
  /// passed since construction (a short command shows none).
  explicit TerminalProgress(bool enabled = true, double delay_seconds = 0);
  /// Clears a transient line still shown.
  ~TerminalProgress();
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  /// Whether stderr is a terminal (where transient lines are shown).
  bool terminal() const { return terminal_; }
  /// On a terminal, after the delay: `line` in place of the previous transient line. Elsewhere nothing.
  void transient(const std::string& line);
  /// A finished step: `line` on a line of its own (after clearing a transient one), terminal or not.
  void line(const std::string& line);
  /// Removes a transient line still shown.
  void clear();

 private:
  bool enabled_;
  bool terminal_;
  std::uint64_t show_after_ns_;
  bool shown_ = false;
};

/// "<verb> 2.50 GiB of 8.00 GiB (31%)".
std::string amount_text(const char* verb, std::uint64_t done, std::uint64_t total);

/// Waits for `future`, showing amount_text(verb, bytes done, total) on a terminal, four times a second, once
/// the wait has lasted a second; the line is cleared when the request ends.
void wait_with_progress(const Future& future, const char* verb, std::uint64_t total);

/// Runs `work` on a thread of its own and waits for it, showing amount_text(verb, done, total) as
/// wait_with_progress does; `work` counts its bytes in `done`.
void run_with_progress(const std::function<void()>& work, const std::atomic<std::uint64_t>& done, const char* verb,
                       std::uint64_t total);

}  // namespace ferry::cli
