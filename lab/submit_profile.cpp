// submit_profile: File::pread of 4 KiB pieces into (fake) GPU memory, DEPTH in flight, on the CPU machine: the
// engine's own per-request work without a GPU (the copies are the fake driver's memcpy). SUBMITTERS threads
// share the DEPTH (as ferry_small_reads' ferry-mt does). It prints the time a request, in pread() and in get(),
// the process's CPU time and context switches a request (voluntary ones are mostly sleeps on contended locks),
// and the pool jobs started (each a wake) and the ops taken together with other requests' ops a request; run
// it under perf, or with alloc_crossings.cpp preloaded to count the heap allocations a request makes
// and which of them cross threads (that tool's "main thread" is the one submitter: use SUBMITTERS=1 with it).
//
// With DEST=host the pieces land in host memory (the host route: no CUDA call at all), which leaves the engine
// alone; the fake driver takes one process-wide lock in every call, so with many threads the fake GPU's rows
// count that lock's waits as well.
//
// COPY_LATENCY_US above 0 runs the fake GPU as a device of its own (FakeDeviceMode::autonomous) whose copies
// complete no sooner than that after they were queued, as a GPU's do: workers then wait for copies.
//
//   ferry_submit_profile [REQUESTS=200000] [DEPTH=64] [THREADS=2] [SUBMITTERS=1] [DEST=fake-gpu|host]
//                        [COPY_LATENCY_US=0]
#include <dlfcn.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <thread>
#include <vector>

#include "ferry/file.hpp"
#include "engine/thread_pool.hpp"
#include "file/open_options.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_platform.hpp"
#include "support/test_files.hpp"

using namespace ferry;

namespace {
double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

// The process's CPU seconds and context switches so far.
struct Usage {
  double cpu = 0, voluntary = 0, involuntary = 0;
  static Usage now() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
    return Usage{sec(u.ru_utime) + sec(u.ru_stime), static_cast<double>(u.ru_nvcsw), static_cast<double>(u.ru_nivcsw)};
  }
};

int main(int argc, char** argv) {
  const int requests = argc > 1 ? std::atoi(argv[1]) : 200000;
  const std::size_t depth = argc > 2 ? static_cast<std::size_t>(std::atoi(argv[2])) : 64;
  const unsigned threads = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 2;
  const unsigned submitters = argc > 4 ? std::max(1u, static_cast<unsigned>(std::atoi(argv[4]))) : 1;
  const std::string dest = argc > 5 ? argv[5] : "fake-gpu";
  const int copy_latency_us = argc > 6 ? std::atoi(argv[6]) : 0;
  if (dest != "fake-gpu" && dest != "host") {
    std::fprintf(stderr, "DEST is fake-gpu or host, not %s\n", dest.c_str());
    return 2;
  }
  constexpr std::uint64_t kPiece = 4096, kFileBytes = 256ull << 20;

  testing::reset_fake_cuda();
  if (copy_latency_us > 0) {
    testing::fake_cuda_script().device_mode = testing::FakeDeviceMode::autonomous;
    testing::fake_cuda_script().copy_latency = std::chrono::microseconds(copy_latency_us);
  }
  const std::string path = (testing::test_dir() / "submit_profile.bin").string();
  testing::write_pattern_file(path, kFileBytes);
  Config config;
  config.set_threads(threads);
  detail::OpenOptions options;
  // Host memory: the process's own platform, which asks no driver while none is loaded.
  if (dest == "fake-gpu") options.gpu = &testing::fake_gpu_platform();
  auto file = detail::open_file(path, "r", config, options);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().to_string().c_str());
    return 1;
  }
  std::vector<char> host_memory(dest == "host" ? 64 * kPiece : 0);
  char* device = dest == "host" ? host_memory.data() : static_cast<char*>(testing::fake_cuda_alloc_device(64 * kPiece));
  {
    std::mt19937_64 rng(1);
    for (int i = 0; i < 2000; ++i) {  // kits, workers, caches
      (void)file->pread(device, kPiece, (rng() % (kFileBytes / kPiece)) * kPiece).get();
    }
  }

  // Hooks of alloc_crossings.cpp when it is preloaded.
  auto start_counting = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "alloc_crossings_start"));
  auto report_counts = reinterpret_cast<void (*)(long)>(dlsym(RTLD_DEFAULT, "alloc_crossings_report"));
  // One submitter's loop: `count` requests, `in_flight` outstanding; adds its time in pread() and get().
  auto submit = [&](unsigned index, int count, std::size_t in_flight, double* in_pread, double* in_get) {
    std::mt19937_64 rng(1 + index);
    std::deque<Future> live;
    for (int i = 0; i < count; ++i) {
      if (live.size() == in_flight) {
        const double t = seconds_now();
        auto r = live.front().get();
        *in_get += seconds_now() - t;
        if (!r.ok()) {
          std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
          std::exit(1);
        }
        live.pop_front();
      }
      const double t = seconds_now();
      live.push_back(file->pread(device + (i % 64) * kPiece, kPiece, (rng() % (kFileBytes / kPiece)) * kPiece));
      *in_pread += seconds_now() - t;
    }
    while (!live.empty()) {
      (void)live.front().get();
      live.pop_front();
    }
  };
  if (start_counting) start_counting();
  std::vector<double> in_pread(submitters), in_get(submitters);
  const std::uint64_t jobs_before = detail::shared_pool().submitted();
  const std::uint64_t gathered_before = file->report().io.gathered_ops;
  const Usage used_before = Usage::now();
  const double began = seconds_now();
  const int each = requests / static_cast<int>(submitters);
  if (submitters == 1) {
    submit(0, each, depth, &in_pread[0], &in_get[0]);  // on the main thread: alloc_crossings' submitter
  } else {
    std::vector<std::thread> pool;
    for (unsigned s = 0; s < submitters; ++s) {
      pool.emplace_back(submit, s, each, std::max<std::size_t>(1, depth / submitters), &in_pread[s], &in_get[s]);
    }
    for (auto& t : pool) t.join();
  }
  const double all = seconds_now() - began;
  const Usage used_after = Usage::now();
  const std::uint64_t jobs = detail::shared_pool().submitted() - jobs_before;
  const std::uint64_t gathered = file->report().io.gathered_ops - gathered_before;
  const int done = each * static_cast<int>(submitters);
  if (report_counts) report_counts(done);
  const double n = done;
  double pread_sum = 0, get_sum = 0;
  for (unsigned s = 0; s < submitters; ++s) {
    pread_sum += in_pread[s];
    get_sum += in_get[s];
  }
  std::printf("%d requests of 4 KiB into %s memory, %zu in flight from %u thread%s, %u workers: %.2f us a "
              "request; a submitter's request %.2f us in pread(), %.2f us in get(); process CPU %.2f us, %.2f "
              "voluntary and %.2f involuntary context switches a request; %.3f pool jobs started (wakes) and %.3f "
              "ops taken with other requests' a request\n",
              done, dest == "host" ? "host" : "fake GPU", depth, submitters, submitters == 1 ? "" : "s", threads,
              all / n * 1e6, pread_sum / n * 1e6, get_sum / n * 1e6, (used_after.cpu - used_before.cpu) / n * 1e6,
              (used_after.voluntary - used_before.voluntary) / n,
              (used_after.involuntary - used_before.involuntary) / n, static_cast<double>(jobs) / n,
              static_cast<double>(gathered) / n);
  return 0;
}
