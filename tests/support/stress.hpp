// A concurrency stress run: many threads, several Files per path (one per compat policy), reads (some as
// batches of pieces) and writes of random unaligned ranges (crossing task boundaries and the end of the file) into host and
// device buffers, every byte checked against a model, and the bytes around each destination checked
// untouched. Each thread owns a disjoint region of every file, so the model is exact while all threads
// share the same File objects. Seeded: a failure names the seed, the thread and the request.
//
// Runs on the fake GPU platform (CPU tests, bounded) and on the real one (GPU tests, the soak).
// Thread safety: run_stress() may be called from one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ferry/config.hpp"
#include "ferry/route.hpp"
#include "platform/gpu_platform.hpp"

namespace ferry::testing {

struct StressOptions {
  std::uint64_t seed = 1;
  unsigned threads = 8;
  unsigned files = 3;
  std::uint64_t region_bytes = (1 << 20) + 4099;  // per thread per file; the last region holds the end
  std::uint64_t task_size = 64 * 1024;
  std::uint64_t bounce_buffer_size = 0;            // 0: task_size
  unsigned ferry_threads = 8;                      // Config::threads of every File
  std::vector<CompatMode> policies = {CompatMode::on, CompatMode::automatic, CompatMode::off};
  std::uint64_t max_requests = 20000;              // in all; the run also stops at max_time
  std::chrono::milliseconds max_time{std::chrono::minutes(3)};
  unsigned device_percent = 75;                    // share of requests into or from device memory
  unsigned batch_percent = 0;                      // share of reads made as pread_batch of up to 8 pieces
  std::vector<int> devices = {0};                  // thread t uses devices[t % size]
  bool write = true;                               // mix writes in (half of the requests)
  const detail::GpuPlatform* gpu = nullptr;        // nullptr: the real platform
  std::filesystem::path dir;                       // where the files go
  /// Called about once a second from the calling thread while the workers run (the soak samples
  /// memory here); `requests` and `bytes` so far.
  std::function<void(std::uint64_t requests, std::uint64_t bytes)> on_tick;
};

struct StressOutcome {
  std::uint64_t requests = 0, reads = 0, writes = 0, batches = 0, device_requests = 0, bytes = 0;
  std::uint64_t wrong_bytes = 0;  // destination bytes that differ from the model, or guard bytes changed
  std::uint64_t errors = 0;       // failed requests (none are expected)
  std::uint64_t ops_by_route[kRouteCount] = {};  // operations per route, from the reports
  std::string first_failure;      // "seed 7, thread 3, request 120: ..."; empty when all went well
  double seconds = 0;
  bool ok() const { return wrong_bytes == 0 && errors == 0 && first_failure.empty(); }
  std::string summary() const;
};

StressOutcome run_stress(const StressOptions& options);

}  // namespace ferry::testing
