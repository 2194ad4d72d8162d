// A mutex for short critical sections that many threads take at high rates: a thread that finds it held spins a
// little (glibc's adaptive mutex) before it sleeps in the kernel. With std::mutex, a thread submitting 4 KiB
// reads in flight slept on the op queue's lock, held by one of the drainers for well under a microsecond, about
// once in three reads (perf on the H200 machine: 80% of its context switches), each sleep and wake costing
// microseconds.
// Thread safety: as std::mutex.
#pragma once

#include <pthread.h>

namespace ferry::detail {

class SpinningMutex {
 public:
  SpinningMutex() = default;
  SpinningMutex(const SpinningMutex&) = delete;
  SpinningMutex& operator=(const SpinningMutex&) = delete;
  ~SpinningMutex() { pthread_mutex_destroy(&mutex_); }

  void lock() { pthread_mutex_lock(&mutex_); }
  bool try_lock() { return pthread_mutex_trylock(&mutex_) == 0; }
  void unlock() { pthread_mutex_unlock(&mutex_); }

 private:
  pthread_mutex_t mutex_ = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
};

}  // namespace ferry::detail
