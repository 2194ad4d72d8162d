// LD_PRELOAD helper for the GPU machine, which has no debugger: on SIGSEGV/SIGBUS/SIGABRT prints the
// crashing thread's frames (module+offset, for addr2line) to stderr, then dies of the same signal.
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_fault(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  static const char head[] = "\n== fatal signal; frames (segv_backtrace):\n";
  write(2, head, sizeof head - 1);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fault;
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGSEGV, &sa, 0);
  sigaction(SIGBUS, &sa, 0);
  sigaction(SIGABRT, &sa, 0);
}
