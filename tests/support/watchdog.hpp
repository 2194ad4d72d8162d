// A watchdog for tests that could hang (every C++ test runs under one: WatchdogPerTest): a hang becomes a
// failure with a cause instead of a stuck run.
//
// If the scope it guards has not ended within the limit, it prints which test hung, every stream-ordered
// request still pending (what it is, how far its steps and its stream got), and the stack of every
// thread of the process (through gdb where it can attach, otherwise each thread's own backtrace), then
// aborts the process, which fails the test.
// Thread safety: one Watchdog per scope; it may be created on any thread.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ferry::testing {

class Watchdog {
 public:
  /// Starts counting; `what` names the guarded work in the report (default: the current gtest's name).
  explicit Watchdog(std::chrono::seconds limit = std::chrono::seconds(60), std::string what = {});
  /// Disarms it.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable disarmed_cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

/// Guards every test of the program with a Watchdog (appended to gtest's listeners by every test program's
/// main): 60 s a test, 180 s under ThreadSanitizer, which runs the CPU tests several times slower.
class WatchdogPerTest : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo& test) override;
  void OnTestEnd(const ::testing::TestInfo& test) override;

 private:
  std::unique_ptr<Watchdog> dog_;
};

/// Prints the stack of every thread of this process to stderr (gdb where it can attach to the process,
/// otherwise each thread's backtrace from a signal handler).
void print_all_stacks();

}  // namespace ferry::testing
