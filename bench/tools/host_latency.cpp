// host_latency: what one small read into host memory costs through Ferry against pread, one at a time
// (issue 21's per-request fixed cost, on any machine: no GPU needed).
//
//   ferry_host_latency FILE [--size 4096] [--requests 100000] [--rounds 3]
//
// Offsets are random and aligned to the size, the same sequence for both; FILE should be in the page cache
// (a first round warms it). Each round prints microseconds per request for File::pread(...).get() and for
// ::pread on a descriptor of the same file, alternating.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ferry/file.hpp"

namespace {

double micros_per(std::chrono::steady_clock::time_point start, int requests) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / requests;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [--size 4096] [--requests 100000] [--rounds 3]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  std::uint64_t size = 4096;
  int requests = 100000, rounds = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--size") == 0) size = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--requests") == 0) requests = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  auto file = ferry::File::open(path, "r");
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().to_string().c_str());
    return 1;
  }
  const std::uint64_t file_size = *file->size();
  if (size == 0 || file_size < 2 * size) {
    std::fprintf(stderr, "%s is too small for requests of %llu bytes\n", path.c_str(),
                 static_cast<unsigned long long>(size));
    return 1;
  }
  std::mt19937_64 rng(1);
  std::vector<std::uint64_t> offsets(static_cast<std::size_t>(requests));
  for (auto& o : offsets) o = rng() % (file_size / size - 1) * size;
  std::vector<char> buffer(size);
  const int fd = ::open(path.c_str(), O_RDONLY);
  for (int round = 0; round < rounds; ++round) {
    auto start = std::chrono::steady_clock::now();
    for (std::uint64_t offset : offsets) {
      auto got = file->pread(buffer.data(), size, offset).get();
      if (!got.ok() || got->bytes != size) {
        std::fprintf(stderr, "%s\n", got.ok() ? "short read" : got.status().to_string().c_str());
        return 1;
      }
    }
    const double ferry_us = micros_per(start, requests);
    start = std::chrono::steady_clock::now();
    for (std::uint64_t offset : offsets) {
      if (::pread(fd, buffer.data(), size, static_cast<off_t>(offset)) != static_cast<ssize_t>(size)) return 1;
    }
    const double pread_us = micros_per(start, requests);
    std::printf("round %d: %llu-byte reads: ferry %.2f us/request, pread %.2f us/request (%.1fx)\n", round,
                static_cast<unsigned long long>(size), ferry_us, pread_us, ferry_us / pread_us);
  }
  ::close(fd);
  return 0;
}
