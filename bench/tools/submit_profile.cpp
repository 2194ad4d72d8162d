// submit_profile: File::pread of 4 KiB pieces into (fake) GPU memory, DEPTH in flight from one thread, on the
// CPU machine: the engine's own per-request work without a GPU (the copies are the fake driver's memcpy). It
// prints the time a request, in pread() and in get(); run it under perf, or with alloc_crossings.cpp preloaded
// to count the heap allocations a request makes and which of them cross threads.
//
//   ferry_submit_profile [REQUESTS=200000] [DEPTH=64] [THREADS=2]
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>

#include "ferry/file.hpp"
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

int main(int argc, char** argv) {
  const int requests = argc > 1 ? std::atoi(argv[1]) : 200000;
  const std::size_t depth = argc > 2 ? static_cast<std::size_t>(std::atoi(argv[2])) : 64;
  const unsigned threads = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 2;
  constexpr std::uint64_t kPiece = 4096, kFileBytes = 256ull << 20;

  testing::reset_fake_cuda();
  const std::string path = (testing::test_dir() / "submit_profile.bin").string();
  testing::write_pattern_file(path, kFileBytes);
  Config config;
  config.set_threads(threads);
  detail::OpenOptions options;
  options.gpu = &testing::fake_gpu_platform();
  auto file = detail::open_file(path, "r", config, options);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().to_string().c_str());
    return 1;
  }
  char* device = static_cast<char*>(testing::fake_cuda_alloc_device(64 * kPiece));
  std::mt19937_64 rng(1);
  auto offset = [&] { return (rng() % (kFileBytes / kPiece)) * kPiece; };
  for (int i = 0; i < 2000; ++i) (void)file->pread(device, kPiece, offset()).get();  // kits, workers, caches

  // Hooks of alloc_crossings.cpp when it is preloaded.
  auto start_counting = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "alloc_crossings_start"));
  auto report_counts = reinterpret_cast<void (*)(long)>(dlsym(RTLD_DEFAULT, "alloc_crossings_report"));
  if (start_counting) start_counting();
  std::deque<Future> live;
  double in_pread = 0, in_get = 0;
  const double began = seconds_now();
  for (int i = 0; i < requests; ++i) {
    if (live.size() == depth) {
      const double t = seconds_now();
      auto r = live.front().get();
      in_get += seconds_now() - t;
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
        return 1;
      }
      live.pop_front();
    }
    const double t = seconds_now();
    live.push_back(file->pread(device + (i % 64) * kPiece, kPiece, offset()));
    in_pread += seconds_now() - t;
  }
  while (!live.empty()) {
    (void)live.front().get();
    live.pop_front();
  }
  const double all = seconds_now() - began;
  if (report_counts) report_counts(requests);
  std::printf("%d requests of 4 KiB, %zu in flight, %u threads: %.2f us a request, %.2f us in pread(), %.2f us in get()\n",
              requests, depth, threads, all / requests * 1e6, in_pread / requests * 1e6, in_get / requests * 1e6);
  return 0;
}
