// A fake CUDA driver for CPU-only tests: a CudaApi table whose "device memory" is host memory.
//
// - cuMemAlloc returns aligned host memory recorded as device memory of device 0 (or the current fake
//   device), so classify_buffer() reports it as device memory and the staged and GDS logic can be run and
//   its results checked with memcmp. Copies to or from "device" addresses outside a live allocation fail
//   with CUDA_ERROR_INVALID_VALUE, which catches overruns and host pointers passed as device pointers.
// - Pinned memory (cuMemHostAlloc, cuMemHostRegister) is tracked: live_pinned() is the leak check.
// - FakeCopyMode::deferred performs async copies only when the stream, an event recorded after them, or the
//   context is synchronised (an event or stream query completes them and answers CUDA_ERROR_NOT_READY once). A
//   bounce buffer reused before its copy finished then shows up as wrong data in the destination.
// - Streams also take memsets (cuMemsetD8Async), waits on a 32-bit word (cuStreamWaitValue32) and writes
//   of one (cuStreamWriteValue32), in order with copies. By default queued work runs only when the stream,
//   an event recorded on it, or the context is synchronised (unmet waits with the fake's lock released), so
//   a test can check what a stream-ordered request did before and after its stream got there.
// - FakeDeviceMode::autonomous runs queued work on a device thread instead, as a GPU does, through a few
//   hardware queues that the streams share: work on one stream can then wait behind another stream's unmet
//   wait, as on a GPU with more streams than hardware connections (CUDA_DEVICE_MAX_CONNECTIONS). With
//   implicit_sync_blocks_driver, calls that synchronise implicitly also hold up every other thread's CUDA
//   calls until the device is idle. Together they make the hidden dependencies a stream-ordered design must
//   survive (docs/stream-order.md) happen on a CPU.
// - Any entry point can be made to fail: fail("cuMemcpyHtoDAsync_v2", CUDA_ERROR_ILLEGAL_ADDRESS).
// - Peer copies (cuMemcpyPeerAsync) check that each side is device memory of its context's device; peer
//   access is granted between distinct devices unless the script says otherwise.
// - As with the real driver, allocations, copies, memsets, streams and events need a current context on
//   the calling thread (make_current(api, device) from primary_context.hpp), else CUDA_ERROR_INVALID_CONTEXT:
//   a worker thread that forgot make_current fails here as it would on a GPU.
//
// Usage: reset_fake_cuda() in SetUp, then pass &fake_cuda_api() where a `const CudaApi*` is wanted.
// Thread safety: the fake's entry points may be called from many threads (one lock inside). Change the
// script only while no other thread is calling in.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "platform/cuda/cuda_api.hpp"

namespace ferry::testing {

enum class FakeCopyMode { immediate, deferred };
enum class FakeDeviceMode { on_synchronize, autonomous };

struct FakeCudaScript {
  int device_count = 1;
  ferry::detail::CUresult init_result = ferry::detail::CUDA_SUCCESS;
  FakeCopyMode copy_mode = FakeCopyMode::immediate;
  std::uint64_t device_total_memory_bytes = 80ull << 30;
  /// What cuDeviceCanAccessPeer answers for two distinct devices (cuCtxEnablePeerAccess follows it).
  bool peer_access = true;
  /// Set before any work is queued (see the top of this file).
  FakeDeviceMode device_mode = FakeDeviceMode::on_synchronize;
  int hardware_queues = 8;  // autonomous: streams share them round robin; the legacy stream takes the first
  /// autonomous: a copy runs no sooner than this long after it was queued (a GPU's submission and DMA latency,
  /// some microseconds), so that a CPU run sees work waiting for copies as on a GPU (lab/submit_profile.cpp).
  std::chrono::microseconds copy_latency{0};
  /// How long cuMemHostAlloc and cuMemHostRegister take (pinning is slow on a GPU machine: about 1.5 ms a kit of two
  /// 4 MiB buffers). Set it before the threads that pin start.
  std::chrono::microseconds pinned_alloc_delay{0};
  bool implicit_sync_blocks_driver = false;  // autonomous: cuMemAlloc, cuMemFree, cuMemHostAlloc,
                                             // cuMemHostRegister, cuStreamCreate, cuCtxSynchronize
  /// Streams that cuStreamIsCapturing reports as being captured into a graph.
  std::set<ferry::detail::CUstream> capturing;

  /// Entry points (by exported name, "cuMemAlloc_v2") that fail with the given result.
  struct Failure {
    ferry::detail::CUresult result;
    int remaining;  // calls left to fail; -1: every call
  };
  std::map<std::string, Failure> failures;

  /// Makes `symbol` return `result` for its next `times` calls (-1: for every call).
  void fail(const std::string& symbol, ferry::detail::CUresult result, int times = -1) {
    failures[symbol] = Failure{result, times};
  }
};

struct FakeCudaCounters {
  std::uint64_t calls = 0;  // every entry point
  std::uint64_t device_allocs = 0, device_frees = 0;
  std::uint64_t pinned_allocs = 0, pinned_frees = 0;
  std::uint64_t host_registers = 0, host_unregisters = 0;
  std::uint64_t htod_copies = 0, dtoh_copies = 0;              // synchronous
  std::uint64_t htod_async_copies = 0, dtoh_async_copies = 0;  // asynchronous
  std::uint64_t batched_copy_calls = 0, batched_copies = 0;   // cuMemcpyBatchAsync: calls, the copies in them
  std::uint64_t htod_bytes = 0, dtoh_bytes = 0;                // both kinds
  std::uint64_t memsets = 0;
  std::uint64_t streams_created = 0, streams_destroyed = 0;
  std::uint64_t events_created = 0, events_destroyed = 0, events_recorded = 0;
  std::uint64_t stream_syncs = 0, event_syncs = 0, event_queries = 0, context_syncs = 0;
  std::uint64_t stream_queries = 0, idle_stream_queries = 0;  // of cuStreamQuery: all, and those that found it idle
  std::uint64_t context_retains = 0, context_releases = 0, set_current_calls = 0;
  std::uint64_t pointer_queries = 0;
  std::uint64_t stream_waits = 0, stream_writes = 0;  // stream memory operations
  std::uint64_t peer_copies = 0, peer_bytes = 0, peer_access_enabled = 0;  // cuMemcpyPeerAsync, cuCtxEnablePeerAccess
};

/// The table of fake entry points (the same object every time; `library` is "fake-cuda").
const ferry::detail::CudaApi& fake_cuda_api();

/// Frees everything the fake holds, forgets primary contexts retained through it, zeroes the counters
/// and restores the default script.
void reset_fake_cuda();

/// The script the fake follows; edit it between reset_fake_cuda() and the code under test.
FakeCudaScript& fake_cuda_script();

/// A snapshot of the counters.
FakeCudaCounters fake_cuda_counters();

/// Live pinned allocations plus registered host ranges (0 after a test that cleaned up).
std::size_t fake_cuda_live_pinned();
/// Bytes pinned (cuMemHostAlloc) or registered (cuMemHostRegister) through the fake and never freed or
/// unregistered: those live now plus those still live when a reset_fake_cuda() dropped them, since the process
/// began. The per-test leak check (support/leak_check.hpp) compares it before and after each test, so that a
/// fixture's reset in TearDown cannot hide a leak.
std::uint64_t fake_cuda_pinned_bytes_not_freed();
/// Live device allocations.
std::size_t fake_cuda_live_device();
/// Async copies queued and not yet performed (deferred mode).
std::size_t fake_cuda_pending_copies();

/// Managed ("unified") memory of `bytes` on `device`, for classification tests; free with fake_cuda_free.
void* fake_cuda_alloc_managed(std::size_t bytes, int device = 0);
/// Device memory on `device` without going through the table (and without counting a call).
void* fake_cuda_alloc_device(std::size_t bytes, int device = 0);
void fake_cuda_free(void* ptr);

}  // namespace ferry::testing
