// wait_for_stream and wait_for_event: query, spin briefly, then yield between queries.
//
// Why not cuStreamSynchronize (or cuEventSynchronize): with the primary context's default scheduling (one
// context, many cores) the driver spins inside it, holding the core for the whole wait. Requests in flight
// from many threads keep more threads waiting for copies than there are cores (16 submitting threads and 16
// workers on the H200 machine's 16), and a spinning waiter then takes the core that a thread with a read or a copy to issue
// needs. Measured there (bench/results/2026-12-03-h200-copy-wait, alternating rounds in two calls): 1 MiB reads
// with 64 in flight from 16 threads 1.13-1.30x, 64 KiB from one thread 1.15-1.40x; a yield without the first
// few microseconds of queries cost 4 KiB reads from 16 threads 0.9x.
#include "platform/cuda/stream_wait.hpp"

#include <sched.h>

#include <chrono>

namespace ferry::detail {
namespace {

// About what a small copy takes to complete once issued: a wait that short is answered without giving
// the core away (a yield would cost a one-at-a-time read its wake-up when other threads are runnable).
constexpr std::chrono::microseconds kSpinBeforeYield{5};

// Asks `query` until it answers something other than CUDA_ERROR_NOT_READY.
template <typename Query>
CUresult wait_until_done(Query&& query) {
  const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeYield;
  for (;;) {
    const CUresult rc = query();
    if (rc != CUDA_ERROR_NOT_READY) return rc;
    if (std::chrono::steady_clock::now() < spin_until) {
      __builtin_ia32_pause();
    } else {
      sched_yield();
    }
  }
}

}  // namespace

CUresult wait_for_stream(const CudaApi& api, CUstream stream) {
  return wait_until_done([&] { return api.cuStreamQuery(stream); });
}

CUresult wait_for_event(const CudaApi& api, CUevent event) {
  return wait_until_done([&] { return api.cuEventQuery(event); });
}

}  // namespace ferry::detail
