// fork_walk_probe: does a child forked while another thread walks the loaded objects (dl_iterate_phdr) hang at
// its own first walk? glibc holds its loader lock during a walk; if fork() leaves it held in the child, the child
// waits for good. One thread walks in a loop; the main thread forks FORKS children, each of which walks once
// under a 2 s alarm. With `guarded`, every walk holds a mutex that a pthread_atfork handler takes before each
// fork (what Ferry does since 5b18296). Not in the build (it needs nothing of Ferry's):
//   g++ -O2 -std=c++20 -pthread lab/fork_walk_probe.cpp -o /tmp/fork_walk_probe
//   /tmp/fork_walk_probe [FORKS=100] [guarded]
#include <link.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace {

std::mutex g_walk;
bool g_guarded = false;

void walk() {
  auto visit = [](dl_phdr_info*, std::size_t, void*) { return 0; };  // every object, as a long walk
  if (!g_guarded) {
    dl_iterate_phdr(visit, nullptr);
    return;
  }
  std::lock_guard<std::mutex> lock(g_walk);
  dl_iterate_phdr(visit, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  const int forks = argc > 1 ? std::atoi(argv[1]) : 100;
  g_guarded = argc > 2 && std::strcmp(argv[2], "guarded") == 0;
  if (g_guarded) pthread_atfork([] { g_walk.lock(); }, [] { g_walk.unlock(); }, [] { g_walk.unlock(); });
  std::atomic<bool> stop{false};
  std::thread walker([&] {
    while (!stop.load()) walk();
  });
  int hung = 0;
  for (int i = 0; i < forks; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(2);
      walk();
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status)) ++hung;
  }
  stop = true;
  walker.join();
  std::printf("%s: %d of %d children hung at their walk\n", g_guarded ? "guarded" : "plain", hung, forks);
  return 0;
}
