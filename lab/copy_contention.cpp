// copy_contention: does the host-to-device copy slow down while other threads read the page cache?
// The staged route does both at once (workers pread into bounce buffers while the copy engine drains
// them), and a timeline of 256 MiB requests suggested the copy engine ran at ~46 GiB/s during the reads
// against ~51 GiB/s alone. A research tool; its output goes into bench/results.
//
//   ferry_copy_contention FILE [--device N]     (FILE should be in the page cache: read it first)
//
// Copies 1 GiB from pinned memory to GPU memory in two shapes (256 MiB chunks on 2 streams; 4 MiB chunks
// on 16 streams, the staged route's shape) alone, then while 4, 8 and 16 threads pread FILE in 4 MiB
// pieces into their own buffers in a loop, and prints the copy rate and the readers' rate for each.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

using namespace ferry::detail;

namespace {

constexpr std::size_t kCopyBytes = std::size_t{1} << 30;
constexpr std::size_t kPiece = std::size_t{4} << 20;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct CopyShape {
  const char* name;
  std::size_t chunk;
  unsigned streams;
};

// GiB/s of one pass of kCopyBytes in the given shape (the best of three).
double copy_rate(const CudaApi& api, CUdeviceptr dev, char* host, std::vector<CUstream>& streams,
                 const CopyShape& shape) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double start = now_s();
    unsigned i = 0;
    for (std::size_t at = 0; at < kCopyBytes; at += shape.chunk, ++i)
      (void)api.cuMemcpyHtoDAsync_v2(dev + at, host + at, shape.chunk, streams[i % shape.streams]);
    for (unsigned s = 0; s < shape.streams; ++s) (void)api.cuStreamSynchronize(streams[s]);
    best = std::max(best, static_cast<double>(kCopyBytes) / (1u << 30) / (now_s() - start));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ferry_copy_contention FILE [--device N]\n");
    return 2;
  }
  const int device = argc > 3 && std::string(argv[2]) == "--device" ? std::atoi(argv[3]) : 0;
  const CudaApi* api = process_cuda_api();
  if (api == nullptr) {
    std::printf("no CUDA: %s\n", process_cuda_status().to_string().c_str());
    return 77;
  }
  if (!make_current(*api, device).ok()) return 1;
  int fd = ::open(argv[1], O_RDONLY);
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < kPiece) {
    std::printf("cannot use %s: %s\n", argv[1], fd < 0 ? std::strerror(errno) : "smaller than 4 MiB");
    return 1;
  }
  const std::size_t pieces = static_cast<std::size_t>(st.st_size) / kPiece;
  CUdeviceptr dev = 0;
  void* host = nullptr;
  if (api->cuMemAlloc_v2(&dev, kCopyBytes) != CUDA_SUCCESS ||
      api->cuMemHostAlloc(&host, kCopyBytes, kMemHostAllocPortable) != CUDA_SUCCESS) {
    std::printf("cannot allocate 1 GiB on the GPU and 1 GiB of pinned memory\n");
    return 1;
  }
  std::memset(host, 0x5A, kCopyBytes);
  std::vector<CUstream> streams(16);
  for (auto& s : streams) (void)api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  const CopyShape shapes[] = {{"256 MiB x 2 streams", std::size_t{256} << 20, 2}, {"4 MiB x 16 streams", kPiece, 16}};

  for (unsigned readers : {0u, 4u, 8u, 16u}) {
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> bytes_read{0};
    std::vector<std::thread> threads;
    for (unsigned r = 0; r < readers; ++r) {
      threads.emplace_back([&, r] {
        std::vector<char> buffer(kPiece, 1);  // touched, like a bounce buffer in use
        for (std::size_t i = r; !stop.load(std::memory_order_relaxed); i += readers) {
          ssize_t n = ::pread(fd, buffer.data(), kPiece, static_cast<off_t>((i % pieces) * kPiece));
          if (n > 0) bytes_read.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(readers ? 20 : 0));  // readers at full speed
    double start = now_s();
    std::uint64_t read_before = bytes_read.load();
    std::printf("%2u reader threads:", readers);
    for (const CopyShape& shape : shapes)
      std::printf("  copy %s %.2f GiB/s;", shape.name, copy_rate(*api, dev, static_cast<char*>(host), streams, shape));
    double secs = now_s() - start;
    stop = true;
    for (auto& t : threads) t.join();
    if (readers) std::printf("  readers %.2f GiB/s", static_cast<double>(bytes_read.load() - read_before) / (1u << 30) / secs);
    std::printf("\n");
  }
  return 0;
}
