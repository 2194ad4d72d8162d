#include "sigint_counter.hpp"

#include <atomic>
#include <csignal>

namespace ferry::python {
namespace {

std::atomic<std::uint64_t> g_count{0};
struct sigaction g_previous{};

void count_then_chain(int signo, siginfo_t* info, void* context) {
  g_count.fetch_add(1, std::memory_order_relaxed);  // lock-free: async-signal-safe
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(signo, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signo);
  }
}

}  // namespace

void install_sigint_counter() {
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
  static bool installed = false;  // module init runs under the GIL
  if (installed) return;
  struct sigaction now{};
  if (::sigaction(SIGINT, nullptr, &now) != 0) return;
  const bool has_handler = (now.sa_flags & SA_SIGINFO) ? now.sa_sigaction != nullptr
                                                        : now.sa_handler != SIG_DFL && now.sa_handler != SIG_IGN;
  if (!has_handler) return;
  g_previous = now;
  struct sigaction counting = now;
  counting.sa_flags |= SA_SIGINFO;
  counting.sa_sigaction = count_then_chain;
  if (::sigaction(SIGINT, &counting, nullptr) == 0) installed = true;
}

std::uint64_t sigint_count() { return g_count.load(std::memory_order_relaxed); }

}  // namespace ferry::python
