// The commands' handlers of SIGINT, SIGTERM and SIGHUP: see cli/support/cleanup_signals.hpp.
#include "cli/support/cleanup_signals.hpp"

#include <cerrno>
#include <csignal>

#include "cli/support/command_output.hpp"
#include "file/output_file.hpp"

namespace ferry::cli {
namespace {

extern "C" void on_fatal_signal(int sig) {
  const int saved = errno;
  detail::remove_named_temporary();
  report_signal(sig);  // "ferry: cancelled: interrupted by SIGINT", and the error object with --json
  // SA_RESETHAND restored the default action; the signal is blocked until this handler returns, and is then
  // delivered again: the process dies of it, and the shell reports 128 + sig.
  (void)::raise(sig);
  errno = saved;
}

}  // namespace

void install_cleanup_signal_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // nohup, `cmd &`: keep
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    (void)::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace ferry::cli
