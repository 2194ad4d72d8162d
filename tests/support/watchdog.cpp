// Watchdog: a timer thread that reports and aborts when the guarded scope outlives its limit.
#include "support/watchdog.hpp"

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ferry/file.hpp"

namespace ferry::testing {
namespace {

std::atomic<bool> g_thread_dumped{false};

// Runs on the signalled thread: its own backtrace, as addresses with the object they fall in.
void print_own_stack(int) {
  void* frames[64];
  int n = ::backtrace(frames, 64);
  char head[64];
  int len = std::snprintf(head, sizeof head, "--- thread %ld\n", static_cast<long>(::syscall(SYS_gettid)));
  if (len > 0) (void)!::write(STDERR_FILENO, head, static_cast<std::size_t>(len));
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  g_thread_dumped.store(true);
}

bool print_stacks_with_gdb() {
  if (::access("/usr/bin/gdb", X_OK) != 0) return false;
  (void)::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // Yama: let a child attach to its parent
  std::string command = fmt::format("/usr/bin/gdb -p {} -batch -nx -ex 'set pagination off' "
                                    "-ex 'thread apply all bt 30' 1>&2 2>/dev/null",
                                    ::getpid());
  return std::system(command.c_str()) == 0;
}

void print_stacks_with_signals() {
  struct sigaction action = {};
  action.sa_handler = print_own_stack;
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR2, &action, nullptr);
  void* warm[1];
  (void)::backtrace(warm, 1);  // loads the unwinder now, not inside a handler
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return;
  const long self = ::syscall(SYS_gettid);
  while (dirent* entry = ::readdir(tasks)) {
    long tid = std::strtol(entry->d_name, nullptr, 10);
    if (tid <= 0 || tid == self) continue;
    g_thread_dumped.store(false);
    if (::syscall(SYS_tgkill, ::getpid(), tid, SIGUSR2) != 0) continue;
    for (int i = 0; i < 1000 && !g_thread_dumped.load(); ++i) ::usleep(1000);
  }
  ::closedir(tasks);
}

std::string current_test_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info ? fmt::format("{}.{}", info->test_suite_name(), info->name()) : "the guarded work";
}

}  // namespace

void print_all_stacks() {
  if (!print_stacks_with_gdb()) print_stacks_with_signals();
}

Watchdog::Watchdog(std::chrono::seconds limit, std::string what) {
  if (what.empty()) what = current_test_name();
  thread_ = std::thread([this, limit, what = std::move(what)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (disarmed_cv_.wait_for(lock, limit, [this] { return disarmed_; })) return;
    std::fprintf(stderr, "\nWATCHDOG: %s did not finish within %lld s; it is taken as hung.\n", what.c_str(),
                 static_cast<long long>(limit.count()));
    auto pending = pending_stream_requests();
    std::fprintf(stderr, "Stream-ordered requests pending: %zu\n", pending.size());
    for (const auto& line : pending) std::fprintf(stderr, "  %s\n", line.c_str());
    std::fprintf(stderr, "Stacks of every thread:\n");
    print_all_stacks();
    std::fflush(stderr);
    std::abort();
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disarmed_ = true;
  }
  disarmed_cv_.notify_all();
  thread_.join();
}

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

}  // namespace

void WatchdogPerTest::OnTestStart(const ::testing::TestInfo& /*test*/) {
  dog_ = std::make_unique<Watchdog>(std::chrono::seconds(kThreadSanitizer ? 180 : 60));
}

void WatchdogPerTest::OnTestEnd(const ::testing::TestInfo& /*test*/) { dog_.reset(); }

}  // namespace ferry::testing
