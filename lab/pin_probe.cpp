// pin_probe: what pinning host memory costs on this machine, and whether the page cache itself can be
// pinned and copied from (no bounce buffer, no CPU copy). A research tool for the staged route's design;
// its output goes into bench/results, not into Ferry's behaviour.
//
//   ferry_pin_probe FILE [--device N]
//
// 1. Anonymous huge-page memory as the staging pool makes it (mmap, MADV_HUGEPAGE, MADV_POPULATE_WRITE,
//    cuMemHostRegister): the time of each step for 16 x 8 MiB, done one after another and from 16 threads.
// 2. The same 128 MiB as one region and one registration.
// 3. FILE mapped read-only (it should be in the page cache): cuMemHostRegister(READ_ONLY) of 64 MiB windows,
//    the copy from each window to the GPU, and the unregistration; then the whole file through a pipeline of
//    such windows on several threads, against the copy ceiling of an ordinary pinned buffer.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

using namespace ferry::detail;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct PinTimes {
  double map = 0, populate = 0, reg = 0;
};

void* map_huge(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes + (2u << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto a = (reinterpret_cast<std::uintptr_t>(p) + (2u << 20) - 1) & ~std::uintptr_t{(2u << 20) - 1};
  return reinterpret_cast<void*>(a);
}

PinTimes pin_one(const CudaApi& api, std::size_t bytes) {
  PinTimes t;
  double a = now_s();
  void* p = map_huge(bytes);
  (void)::madvise(p, bytes, MADV_HUGEPAGE);
  double b = now_s();
  (void)::madvise(p, bytes, MADV_POPULATE_WRITE);
  double c = now_s();
  CUresult rc = api.cuMemHostRegister_v2(p, bytes, kMemHostRegisterPortable);
  double d = now_s();
  if (rc != CUDA_SUCCESS) std::printf("  register failed: %s\n", cuda_error_text(api, rc).c_str());
  t.map = b - a;
  t.populate = c - b;
  t.reg = d - c;
  return t;
}

void anonymous_pinning(const CudaApi& api, int device) {
  constexpr int kKits = 16;
  constexpr std::size_t kKit = 8u << 20;
  PinTimes sum;
  double start = now_s();
  for (int i = 0; i < kKits; ++i) {
    PinTimes t = pin_one(api, kKit);
    sum.map += t.map;
    sum.populate += t.populate;
    sum.reg += t.reg;
  }
  std::printf("anonymous, %d x 8 MiB one after another: %.1f ms (map %.1f, populate %.1f, register %.1f)\n", kKits,
              (now_s() - start) * 1e3, sum.map * 1e3, sum.populate * 1e3, sum.reg * 1e3);
  std::vector<PinTimes> each(kKits);
  std::vector<std::thread> threads;
  start = now_s();
  for (int i = 0; i < kKits; ++i) {
    threads.emplace_back([&, i] {
      (void)make_current(api, device);
      each[i] = pin_one(api, kKit);
    });
  }
  for (auto& t : threads) t.join();
  double wall = now_s() - start;
  PinTimes par;
  for (auto& t : each) {
    par.map += t.map;
    par.populate += t.populate;
    par.reg += t.reg;
  }
  std::printf("anonymous, %d x 8 MiB from %d threads: %.1f ms wall (sums: map %.1f, populate %.1f, register %.1f)\n",
              kKits, kKits, wall * 1e3, par.map * 1e3, par.populate * 1e3, par.reg * 1e3);
  start = now_s();
  PinTimes one = pin_one(api, kKits * kKit);
  std::printf("anonymous, one 128 MiB region: %.1f ms (map %.1f, populate %.1f, register %.1f)\n",
              (now_s() - start) * 1e3, one.map * 1e3, one.populate * 1e3, one.reg * 1e3);
  // Populate from 16 threads, then one registration.
  void* p = map_huge(kKits * kKit);
  (void)::madvise(p, kKits * kKit, MADV_HUGEPAGE);
  start = now_s();
  threads.clear();
  for (int i = 0; i < kKits; ++i)
    threads.emplace_back([&, i] { (void)::madvise(static_cast<char*>(p) + i * kKit, kKit, MADV_POPULATE_WRITE); });
  for (auto& t : threads) t.join();
  double populated = now_s();
  (void)api.cuMemHostRegister_v2(p, kKits * kKit, kMemHostRegisterPortable);
  std::printf("anonymous, 128 MiB populated from 16 threads then registered once: %.1f ms (populate %.1f, register %.1f)\n",
              (now_s() - start) * 1e3, (populated - start) * 1e3, (now_s() - populated) * 1e3);
  void* h = nullptr;
  start = now_s();
  CUresult rc = api.cuMemHostAlloc(&h, kKits * kKit, kMemHostAllocPortable);
  std::printf("cuMemHostAlloc 128 MiB: %.1f ms (%s)\n", (now_s() - start) * 1e3, rc == CUDA_SUCCESS ? "ok" : "failed");
}

void page_cache_windows(const CudaApi& api, int device, const char* path) {
  int fd = ::open(path, O_RDONLY);
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    std::printf("cannot open %s: %s\n", path, std::strerror(errno));
    return;
  }
  const std::size_t size = static_cast<std::size_t>(st.st_size) & ~std::size_t{(64u << 20) - 1};
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    std::printf("mmap failed: %s\n", std::strerror(errno));
    return;
  }
  CUdeviceptr dev = 0;
  if (api.cuMemAlloc_v2(&dev, size) != CUDA_SUCCESS) {
    std::printf("cuMemAlloc of %zu failed\n", size);
    return;
  }
  CUstream stream = nullptr;
  (void)api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
  for (std::size_t window : {std::size_t{4} << 20, std::size_t{64} << 20, std::size_t{256} << 20}) {
    double reg = 0, copy = 0, unreg = 0;
    std::size_t windows = 0;
    for (std::size_t at = 0; at + window <= size && at < (std::size_t{1} << 30); at += window, ++windows) {
      char* p = static_cast<char*>(map) + at;
      double a = now_s();
      CUresult rc = api.cuMemHostRegister_v2(p, window, kMemHostRegisterReadOnly);
      double b = now_s();
      if (rc != CUDA_SUCCESS) {
        std::printf("register (READ_ONLY) of a %zu MiB file window failed: %s\n", window >> 20,
                    cuda_error_text(api, rc).c_str());
        return;
      }
      (void)api.cuMemcpyHtoDAsync_v2(dev + at, p, window, stream);
      (void)api.cuStreamSynchronize(stream);
      double c = now_s();
      (void)api.cuMemHostUnregister(p);
      double d = now_s();
      reg += b - a;
      copy += c - b;
      unreg += d - c;
    }
    double gib = static_cast<double>(windows * window) / (1u << 30);
    std::printf("page cache, %zu MiB windows over 1 GiB: register %.2f GiB/s, copy %.2f GiB/s, unregister %.2f GiB/s\n",
                window >> 20, gib / reg, gib / copy, gib / unreg);
  }
  // The whole file through a pipeline: each of T threads registers a window, copies it on its own stream,
  // waits, unregisters, takes the next.
  for (unsigned nthreads : {2u, 4u, 8u}) {
    for (std::size_t window : {std::size_t{16} << 20, std::size_t{64} << 20}) {
      std::atomic<std::size_t> next{0};
      std::vector<std::thread> threads;
      double start = now_s();
      for (unsigned i = 0; i < nthreads; ++i) {
        threads.emplace_back([&] {
          (void)make_current(api, device);
          CUstream s = nullptr;
          (void)api.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
          for (std::size_t at = next.fetch_add(window); at < size; at = next.fetch_add(window)) {
            char* p = static_cast<char*>(map) + at;
            if (api.cuMemHostRegister_v2(p, window, kMemHostRegisterReadOnly) != CUDA_SUCCESS) continue;
            (void)api.cuMemcpyHtoDAsync_v2(dev + at, p, window, s);
            (void)api.cuStreamSynchronize(s);
            (void)api.cuMemHostUnregister(p);
          }
          (void)api.cuStreamDestroy_v2(s);
        });
      }
      for (auto& t : threads) t.join();
      double secs = now_s() - start;
      std::printf("page cache pipeline, %u threads, %zu MiB windows: %.2f GiB/s over %.1f GiB\n", nthreads,
                  window >> 20, static_cast<double>(size) / (1u << 30) / secs, static_cast<double>(size) / (1u << 30));
    }
  }
  // The ceiling for comparison: an ordinary pinned buffer, 64 MiB copies on 2 streams.
  void* host = nullptr;
  std::size_t ceiling_bytes = std::min(size, std::size_t{4} << 30);
  if (api.cuMemHostAlloc(&host, ceiling_bytes, kMemHostAllocPortable) == CUDA_SUCCESS) {
    CUstream s2 = nullptr;
    (void)api.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING);
    for (int rep = 0; rep < 3; ++rep) {
      double start = now_s();
      int i = 0;
      for (std::size_t at = 0; at < ceiling_bytes; at += 64u << 20, ++i)
        (void)api.cuMemcpyHtoDAsync_v2(dev + at, static_cast<char*>(host) + at, 64u << 20, i % 2 ? s2 : stream);
      (void)api.cuStreamSynchronize(stream);
      (void)api.cuStreamSynchronize(s2);
      std::printf("pinned copy ceiling (64 MiB x 2 streams): %.2f GiB/s\n",
                  static_cast<double>(ceiling_bytes) / (1u << 30) / (now_s() - start));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ferry_pin_probe FILE [--device N]\n");
    return 2;
  }
  int device = argc > 3 && std::string(argv[2]) == "--device" ? std::atoi(argv[3]) : 0;
  const CudaApi* api = process_cuda_api();
  if (api == nullptr) {
    std::printf("no CUDA: %s\n", process_cuda_status().to_string().c_str());
    return 77;
  }
  if (!make_current(*api, device).ok()) return 1;
  anonymous_pinning(*api, device);
  page_cache_windows(*api, device, argv[1]);
  return 0;
}
