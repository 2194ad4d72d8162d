// host_latency: what small reads into host memory cost through Ferry against pread (issue 21's per-request
// and per-piece costs, on any machine: no GPU needed).
//
//   ferry_host_latency FILE [--size 4096] [--requests 100000] [--rounds 3] [--threads 1] [--in-flight 1]
//                      [--batch 0] [--cold]
//
// Offsets are random and aligned to the size, the same sequence for both; FILE should be in the page cache
// (a first round warms it). Each round times Ferry, then ::pread on a descriptor of the same file from as many
// threads, alternating, and prints microseconds per request (per piece for batches) and requests per second:
//   default        File::pread(...).get(), one at a time on each of `threads` threads
//   --in-flight D  D File::pread requests outstanding on each thread (Future::get of the oldest)
//   --batch N      File::pread_batch of N pieces at a time on each thread
//   --cold         FILE's pages are dropped before each timed part, and pread reads with O_DIRECT: the disk's
//                  random-read rate at the same queue depth (threads x in-flight or threads)
// Every byte Ferry read is compared with what pread read.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/host_memory.hpp"
#include "ferry/file.hpp"
#include "ferry/page_cache.hpp"

namespace {

struct Options {
  std::uint64_t size = 4096;
  int requests = 100000, rounds = 3, threads = 1, in_flight = 1, batch = 0;
  bool cold = false;
};

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "ferry_host_latency: %s\n", why.c_str());
  std::exit(1);
}

// Runs `body(thread, first, end)` on `threads` threads over equal shares of [0, requests); returns seconds.
template <typename Body>
double on_threads(const Options& o, Body body) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  const int share = o.requests / o.threads;
  for (int t = 0; t < o.threads; ++t) pool.emplace_back([&, t] { body(t, t * share, (t + 1) * share); });
  for (auto& t : pool) t.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [--size 4096] [--requests 100000] [--rounds 3] [--threads 1] "
                 "[--in-flight 1] [--batch 0]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  Options o;
  for (int i = 2; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--cold") {
      o.cold = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) fail("missing value after " + a);
    const char* v = argv[i + 1];
    if (a == "--size") o.size = std::strtoull(v, nullptr, 10);
    else if (a == "--requests") o.requests = std::atoi(v);
    else if (a == "--rounds") o.rounds = std::atoi(v);
    else if (a == "--threads") o.threads = std::max(1, std::atoi(v));
    else if (a == "--in-flight") o.in_flight = std::max(1, std::atoi(v));
    else if (a == "--batch") o.batch = std::max(0, std::atoi(v));
    else fail("unknown option " + a);
  }
  auto file = ferry::File::open(path, "r");
  if (!file.ok()) fail(file.status().to_string());
  const std::uint64_t file_size = *file->size();
  if (o.size == 0 || file_size < 2 * o.size) fail(path + " is too small for requests of that size");
  o.requests -= o.requests % o.threads;
  std::mt19937_64 rng(1);
  std::vector<std::uint64_t> offsets(static_cast<std::size_t>(o.requests));
  for (auto& off : offsets) off = rng() % (file_size / o.size - 1) * o.size;
  // Each request lands in its own slot, so that every byte can be checked against pread's afterwards (page
  // aligned, as O_DIRECT wants).
  const std::size_t bytes = offsets.size() * o.size;
  auto got = ferry::detail::HostMemory::allocate(bytes).value();
  auto want = ferry::detail::HostMemory::allocate(bytes).value();
  const int fd = ::open(path.c_str(), O_RDONLY | (o.cold ? O_DIRECT : 0));
  if (fd < 0) fail("cannot open " + path);
  auto slot = [&](ferry::detail::HostMemory& m, int i) {
    return reinterpret_cast<char*>(m.data()) + static_cast<std::size_t>(i) * o.size;
  };
  auto drop = [&] {
    if (o.cold) (void)ferry::page_cache::evict(path);
  };
  auto check = [](ferry::Result<ferry::Transfer> r, std::uint64_t bytes) {
    if (!r.ok()) fail(r.status().to_string());
    if (r->bytes != bytes) fail("short read");
  };
  const char* what = o.batch > 0 ? "pread_batch" : o.in_flight > 1 ? "pread in flight" : "pread().get()";
  for (int round = 0; round < o.rounds; ++round) {
    drop();
    const double ferry_s = on_threads(o, [&](int, int first, int end) {
      if (o.batch > 0) {
        std::vector<ferry::Piece> pieces;
        for (int i = first; i < end; i += o.batch) {
          pieces.clear();
          for (int k = i; k < std::min(end, i + o.batch); ++k) pieces.push_back({slot(got, k), o.size, offsets[k]});
          check(file->pread_batch(pieces).get(), pieces.size() * o.size);
        }
        return;
      }
      std::deque<ferry::Future> live;
      for (int i = first; i < end; ++i) {
        if (static_cast<int>(live.size()) == o.in_flight) {
          check(live.front().get(), o.size);
          live.pop_front();
        }
        live.push_back(file->pread(slot(got, i), o.size, offsets[i]));
      }
      for (auto& f : live) check(f.get(), o.size);
    });
    drop();
    const double pread_s = on_threads(o, [&](int, int first, int end) {
      for (int i = first; i < end; ++i) {
        if (::pread(fd, slot(want, i), o.size, static_cast<off_t>(offsets[i])) != static_cast<ssize_t>(o.size)) {
          fail("pread failed");
        }
      }
    });
    if (std::memcmp(got.data(), want.data(), bytes) != 0) fail("Ferry's bytes differ from pread's");
    const double n = o.requests;
    std::printf("round %d: %s%llu-byte reads, %d thread(s), %s%s: ferry %.2f us/request (%.3f M/s), pread %.2f "
                "us/request (%.3f M/s), %.2fx\n",
                round, o.cold ? "cold " : "", static_cast<unsigned long long>(o.size), o.threads, what,
                o.batch > 0 ? (" of " + std::to_string(o.batch)).c_str()
                            : o.in_flight > 1 ? (" " + std::to_string(o.in_flight)).c_str() : "",
                ferry_s / n * 1e6 * o.threads, n / ferry_s / 1e6, pread_s / n * 1e6 * o.threads,
                n / pread_s / 1e6, ferry_s / pread_s);
    std::fflush(stdout);
  }
  ::close(fd);
  return 0;
}
