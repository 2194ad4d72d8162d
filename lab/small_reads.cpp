// small_reads: many small reads at random offsets into GPU memory (issue 21), Ferry beside the plain loop,
// in one run: single requests in flight and one at a time, the batch API, hot or cold.
//
//   ferry_small_reads FILE [--device N] [--sizes 4KiB,64KiB,1MiB,16MiB] [--in-flight 64] [--threads 16]
//                     [--cache hot|cold] [--bytes-per-mode 2GiB] [--seed N] [--json-out F]
//                     [--modes ferry,ferry-1,...] [--latency-requests 4000] [--batches-in-flight 2]
//                     [--batch-bytes 32MiB]
//
// Offsets are 4 KiB-aligned, uniformly random over FILE (the same sequence for every mode). Modes:
//   ferry        File::pread of each request, `in-flight` outstanding (submitted from one thread)
//   ferry-mt     the same number outstanding, submitted from `threads` threads
//   ferry-1      File::pread(...).get(), one at a time (latency)
//   batch        File::pread_batch: pieces of `batch-bytes` batches into one contiguous buffer, `batches-in-flight`
//                of them in flight (default 2, as a data loader that prepares the next batch while one is used)
//   batch-scatter  the same batches with each one's pieces listed last slot first: no piece lands right after
//                the one before it (pieces in buffers of their own), so each fill moves as one batched copy
//   batch-host   the same batches into pinned host memory (the host route: nothing copied to the GPU)
//   plain        `threads` threads, each: pread into its pinned buffer, cuMemcpyHtoDAsync, cuStreamSynchronize
//   plain-1      the same on one thread (latency)
//   plain-fill   the batch pattern without Ferry: `threads` threads, each reading 4 MiB fills of consecutive
//                pieces into a pinned bounce buffer, one copy per fill, waiting for it before reading on
//   plain-pipe   the same with two bounce buffers a thread: the next fill is read while the last is copied
//   plain-batches  plain-pipe in the batch mode's batches, as many in flight, each thread keeping its buffers
//                between batches and looking at its copies after every piece
//   plain-calls  the plain loop plus Ferry's per-request questions (fstat for the size, cuPointerGetAttributes
//                of the destination); plain-calls-1 the same one at a time
//   plain-combined  the plain loop's reads, their copies combined across threads into batched copies
//                (cuMemcpyBatchAsync, one stream): whether one copy for many concurrent requests wins
//   pageable-1   plain-1 from a pageable buffer (the driver's own path for small pageable copies)
//   raw-host     `threads` threads of preads into host memory, nothing copied: the page cache's rate at that
//                size and depth (hot), or the disk's with O_DIRECT (cold): the most any staged path can read
// Under each row: the process's CPU time and context switches a request over the timed run, the machine's steal
// time (CPUs' time taken by the host, in a virtual machine) a request, for ferry and
// ferry-mt the submitting threads' time in pread() and in get(), and for Ferry's modes the engine's pool jobs
// (worker starts) and the ops taken together with other requests', a request.
// Each mode first runs one window untimed (its one-time set-up), then the timed run, then again, not timed,
// checking every byte: each window of requests lands in its own slots of the device buffer, is copied back
// and compared with what an independent pread of FILE says. Prints a table and, with --json-out, the
// figures; cold drops FILE's pages before each timed run (no root).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/host_memory.hpp"
#include "base/unique_fd.hpp"
#include "engine/thread_pool.hpp"
#include "ferry/config.hpp"
#include "ferry/file.hpp"
#include "ferry/page_cache.hpp"
#include "platform/cuda/buffer_kind.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

using namespace ferry;
using namespace ferry::detail;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "ferry_small_reads: %s\n", why.c_str());
  std::exit(1);
}

struct Options {
  std::string path;
  int device = 0;
  std::vector<std::uint64_t> sizes{4 << 10, 64 << 10, 1 << 20, 16 << 20};
  unsigned in_flight = 64, threads = 16;
  unsigned batches_in_flight = 2;
  std::uint64_t batch_bytes = 32 << 20;  // a batch of the batch modes
  bool cold = false;
  std::uint64_t bytes_per_mode = 2ull << 30;
  unsigned seed = 21;
  std::string json_out;
  std::vector<std::string> modes;      // empty: every mode
  std::uint64_t latency_requests = 4000;  // requests of the one-at-a-time modes
};

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> items;
  for (std::size_t at = 0; at < list.size();) {
    std::size_t comma = list.find(',', at);
    items.push_back(list.substr(at, comma - at));
    at = comma == std::string::npos ? list.size() : comma + 1;
  }
  return items;
}

std::uint64_t size_arg(const std::string& text) {
  auto r = parse_size(text, "size");
  if (!r.ok()) die(r.status().to_string());
  return *r;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--device") o.device = std::stoi(next());
    else if (a == "--sizes") {
      o.sizes.clear();
      for (const auto& item : split_list(next())) o.sizes.push_back(size_arg(item));
    } else if (a == "--modes") o.modes = split_list(next());
    else if (a == "--latency-requests") o.latency_requests = std::stoull(next()); else if (a == "--in-flight") o.in_flight = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--batches-in-flight") o.batches_in_flight = std::max(1u, static_cast<unsigned>(std::stoul(next())));
    else if (a == "--batch-bytes") o.batch_bytes = size_arg(next());
    else if (a == "--threads") o.threads = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--cache") o.cold = next() == "cold";
    else if (a == "--bytes-per-mode") o.bytes_per_mode = size_arg(next());
    else if (a == "--seed") o.seed = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--json-out") o.json_out = next();
    else if (o.path.empty() && a[0] != '-') o.path = a;
    else die("unknown argument " + a + " (see the top of lab/small_reads.cpp)");
  }
  if (o.path.empty()) die("usage: ferry_small_reads FILE [options]");
  return o;
}

// The run for one size: offsets, the device buffer of slots, and the file's size.
struct Plan {
  std::uint64_t size = 0;
  std::vector<std::uint64_t> offsets;
  unsigned slots = 0;  // requests in a window, each in its own slot of `size` bytes
};

struct Gpu {
  const CudaApi* api = nullptr;
  CUdeviceptr dev = 0;
  std::uint64_t bytes = 0;
};

struct ModeResult {
  std::string mode;
  double seconds = 0;
  // The process's CPU time and context switches over the timed run (getrusage): where a mode's time goes
  // that its wall time hides (threads spinning, or sleeping and being woken, per request).
  double cpu_seconds = 0;
  long voluntary_switches = 0, involuntary_switches = 0;
  // Time the machine's CPUs were ready but ran another guest (steal, /proc/stat), summed over the CPUs: in a
  // virtual machine a mode's threads may lose cores to the host without any switch the guest counts.
  double steal_seconds = 0;
  // Ferry's side of it: pool jobs submitted (a start of a worker, mostly a wake on the submitting thread) and ops
  // taken together with other requests' ops (the File's io.gathered_ops), over the timed run.
  std::uint64_t pool_jobs = 0, gathered_ops = 0;
  std::uint64_t requests = 0, bytes = 0;
  bool verified = false;
  std::string error;
};

// Where the submitting threads of the in-flight modes spend their time: in pread() (submitting) and in
// get() (waiting for the oldest request), summed over the threads.
struct InFlightTimes {
  std::mutex mutex;
  double submitting = 0, waiting = 0;
  std::uint64_t requests = 0;
  // The CPUs the submitting threads were seen on (every 256th request) and how often one had moved: whether a
  // slow run is one whose submitter shared or changed its CPU.
  std::set<int> cpus;
  std::uint64_t moves = 0;
  void add(double s, double w, std::uint64_t n, const std::set<int>& seen, std::uint64_t moved) {
    std::lock_guard<std::mutex> lock(mutex);
    submitting += s;
    waiting += w;
    requests += n;
    cpus.insert(seen.begin(), seen.end());
    moves += moved;
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mutex);
    submitting = waiting = 0;
    requests = 0;
    cpus.clear();
    moves = 0;
  }
  std::string cpus_text() const {
    std::string text;
    for (int c : cpus) text += (text.empty() ? "" : ",") + std::to_string(c);
    return text;
  }
  double submit_us() const { return requests ? submitting / static_cast<double>(requests) * 1e6 : 0; }
  double wait_us() const { return requests ? waiting / static_cast<double>(requests) * 1e6 : 0; }
};

// One mode: moves requests [first, first + count) into the slots (request first + i into slot i modulo
// the slots) and returns once they have landed; `verify_window` says the call is a checked window.
using Runner = std::function<void(const Plan&, std::size_t first, std::size_t count, bool verify_window)>;

std::vector<std::uint8_t> expected_bytes(int fd, const Plan& p, std::size_t first, std::size_t count) {
  std::vector<std::uint8_t> out(count * p.size);
  for (std::size_t i = 0; i < count; ++i) {
    if (::pread(fd, out.data() + i * p.size, p.size, static_cast<off_t>(p.offsets[first + i])) !=
        static_cast<ssize_t>(p.size)) {
      die("reference pread failed");
    }
  }
  return out;
}

// What Ferry asks the system per request before it reads (FileState::submit and classify_buffer): the
// file's size and what the destination is.
void ask_like_ferry(int fd, void* dst, std::uint64_t size) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < size) die("fstat");
  auto kind = classify_buffer(process_cuda_api(), dst, size);
  if (!kind.ok() || kind->kind != MemoryKind::device) die("cuPointerGetAttributes did not see device memory");
}

// cuda.h's CUmemcpyAttributes (CUDA 12.8 and later), for the one batched-copy probe.
struct MemcpyAttributes {
  int src_access_order = 1;  // CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
  int src_location[2] = {0, 0};
  int dst_location[2] = {0, 0};
  unsigned flags = 0;
};
using MemcpyBatchAsyncFn = CUresult (*)(CUdeviceptr* dsts, CUdeviceptr* srcs, std::size_t* sizes, std::size_t count,
                                        MemcpyAttributes* attrs, std::size_t* attrs_idxs, std::size_t num_attrs,
                                        CUstream stream);

// Copies from many threads combined into batched copies (plain-combined): see that mode.
class CopyCombiner {
 public:
  explicit CopyCombiner(const CudaApi& api) : api_(api) {
    void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cuda != nullptr) batch_ = reinterpret_cast<MemcpyBatchAsyncFn>(::dlsym(cuda, "cuMemcpyBatchAsync_v2"));
  }
  ~CopyCombiner() {
    for (auto e : events_) (void)api_.cuEventDestroy_v2(e);
    if (stream_ != nullptr) (void)api_.cuStreamDestroy_v2(stream_);
  }
  bool available() const { return batch_ != nullptr; }
  // Copies per batched copy since the last call (how much combining happened).
  double take_copies_per_batch() {
    std::lock_guard<std::mutex> lock(mutex_);
    const double per = batches_ > 0 ? static_cast<double>(copies_) / static_cast<double>(batches_) : 0;
    batches_ = copies_ = 0;
    return per;
  }

  // Copies `bytes` from pinned `src` to `dst` and returns once they have landed.
  void copy(CUdeviceptr dst, const void* src, std::size_t bytes) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stream_ == nullptr) {
      (void)api_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING);
      events_.assign(kEvents, nullptr);
      for (auto& e : events_) (void)api_.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    }
    dsts_.push_back(dst);
    srcs_.push_back(reinterpret_cast<CUdeviceptr>(src));
    sizes_.push_back(bytes);
    const std::uint64_t mine = open_round_;
    if (!issuing_) {
      issuing_ = true;
      while (!dsts_.empty()) {
        std::vector<CUdeviceptr> dsts, srcs;
        std::vector<std::size_t> sizes;
        dsts.swap(dsts_);
        srcs.swap(srcs_);
        sizes.swap(sizes_);
        const std::uint64_t round = open_round_++;
        lock.unlock();
        MemcpyAttributes attrs;
        std::size_t first = 0;
        if (batch_(dsts.data(), srcs.data(), sizes.data(), dsts.size(), &attrs, &first, 1, stream_) != CUDA_SUCCESS) {
          die("cuMemcpyBatchAsync failed");
        }
        (void)api_.cuEventRecord(events_[round % kEvents], stream_);
        lock.lock();
        issued_ = round + 1;
        ++batches_;
        copies_ += dsts.size();
        issued_cv_.notify_all();
      }
      issuing_ = false;
    } else {
      issued_cv_.wait(lock, [&] { return issued_ > mine; });
    }
    // A later round may have re-recorded the event: it is later on the same stream, so waiting for it
    // still covers this copy.
    CUevent done = events_[mine % kEvents];
    lock.unlock();
    (void)api_.cuEventSynchronize(done);
  }

 private:
  static constexpr std::size_t kEvents = 64;
  const CudaApi& api_;
  MemcpyBatchAsyncFn batch_ = nullptr;
  std::mutex mutex_;
  std::condition_variable issued_cv_;
  CUstream stream_ = nullptr;
  std::vector<CUevent> events_;
  std::vector<CUdeviceptr> dsts_, srcs_;  // the open round's copies
  std::vector<std::size_t> sizes_;
  std::uint64_t open_round_ = 0;  // the round listed copies go in
  std::uint64_t issued_ = 0;      // rounds issued
  bool issuing_ = false;
  std::uint64_t batches_ = 0, copies_ = 0;
};

class Bench {
 public:
  Bench(const Options& o, const CudaApi& api) : o_(o), api_(api) {
    fd_ = ::open(o.path.c_str(), O_RDONLY);
    if (fd_ < 0) die("cannot open " + o.path);
    struct stat st {};
    ::fstat(fd_, &st);
    file_bytes_ = static_cast<std::uint64_t>(st.st_size);
    Config c = *default_config();
    c.set_threads(o.threads);
    auto f = File::open(o.path, "r", c);
    if (!f.ok()) die(f.status().to_string());
    file_.emplace(std::move(*f));
  }
  ~Bench() { ::close(fd_); }

  Plan plan(std::uint64_t size) const {
    Plan p;
    p.size = size;
    std::uint64_t count = std::clamp<std::uint64_t>(o_.bytes_per_mode / size, 256, 200000);
    std::mt19937_64 rng(o_.seed + size);
    std::uniform_int_distribution<std::uint64_t> pick(0, (file_bytes_ - size) / 4096);
    for (std::uint64_t i = 0; i < count; ++i) p.offsets.push_back(pick(rng) * 4096);
    // Every batch in flight lands in slots of its own.
    p.slots = std::max<unsigned>(o_.in_flight, static_cast<unsigned>(std::max<std::uint64_t>(
                                                   1, o_.batches_in_flight * (o_.batch_bytes / size))));
    return p;
  }

  void drop_cache() {
    if (!o_.cold) return;
    (void)page_cache::evict(o_.path);
  }

  // Times `run` over every request, then checks every byte window by window. One untimed window first, so
  // that the mode's one-time work (pinning staging for as many workers as it keeps busy, starting them) is
  // not timed: without it, a batch measured after the one-at-a-time modes pinned 15 kits in its timed region.
  // The steal time of all CPUs so far, in seconds (the kernel counts it in USER_HZ ticks); 0 where unknown.
  static double steal_seconds_now() {
    std::FILE* f = std::fopen("/proc/stat", "r");
    if (f == nullptr) return 0;
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait,
                                &irq, &softirq, &steal);
    std::fclose(f);
    return got == 8 ? static_cast<double>(steal) / static_cast<double>(::sysconf(_SC_CLK_TCK)) : 0;
  }

  ModeResult measure(const std::string& mode, const Plan& p, CUdeviceptr dev, const Runner& run) {
    ModeResult r;
    r.mode = mode;
    // Ferry's modes pin every worker's staging first, as a program does with File::prepare before its timed
    // loop: the untimed window alone pinned only the kits its two batches kept busy at once, and the other 7-8
    // were pinned inside the timed run (bench/results/2026-12-06-h100-kit-timeline).
    if (mode.starts_with("ferry") || mode.starts_with("batch")) {
      auto prepared = file().prepare(reinterpret_cast<void*>(dev), p.size);
      if (!prepared.ok()) die("prepare: " + prepared.status().to_string());
    }
    run(p, 0, std::min<std::size_t>(p.slots, p.offsets.size()), false);
    drop_cache();
    struct rusage before {}, after {};
    const std::uint64_t jobs_before = detail::shared_pool().submitted();
    const std::uint64_t gathered_before = file().report().io.gathered_ops;
    const double steal_before = steal_seconds_now();
    ::getrusage(RUSAGE_SELF, &before);
    double t = now_s();
    run(p, 0, p.offsets.size(), false);
    r.seconds = now_s() - t;
    ::getrusage(RUSAGE_SELF, &after);
    r.steal_seconds = steal_seconds_now() - steal_before;
    r.pool_jobs = detail::shared_pool().submitted() - jobs_before;
    r.gathered_ops = file().report().io.gathered_ops - gathered_before;
    auto cpu = [](const struct rusage& u) {
      return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
             static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
    };
    r.cpu_seconds = cpu(after) - cpu(before);
    r.voluntary_switches = after.ru_nvcsw - before.ru_nvcsw;
    r.involuntary_switches = after.ru_nivcsw - before.ru_nivcsw;
    r.requests = p.offsets.size();
    r.bytes = r.requests * p.size;
    std::vector<std::uint8_t> back(static_cast<std::size_t>(p.slots) * p.size);
    for (std::size_t first = 0; first < p.offsets.size(); first += p.slots) {
      std::size_t count = std::min<std::size_t>(p.slots, p.offsets.size() - first);
      (void)api_.cuMemsetD8_v2(dev, 0xA5, back.size());
      run(p, first, count, true);
      (void)api_.cuMemcpyDtoH_v2(back.data(), dev, count * p.size);
      auto want = expected_bytes(fd_, p, first, count);
      if (std::memcmp(back.data(), want.data(), want.size()) != 0) {
        r.error = fmt::format("wrong bytes in the window of requests {}..{}", first, first + count);
        return r;
      }
    }
    r.verified = true;
    return r;
  }

  File& file() { return *file_; }
  const Options& options() const { return o_; }

 private:
  const Options& o_;
  const CudaApi& api_;
  int fd_ = -1;
  std::uint64_t file_bytes_ = 0;
  std::optional<File> file_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  const CudaApi* api = process_cuda_api();
  if (api == nullptr) die("no CUDA: " + process_cuda_status().to_string());
  ScopedDeviceContext context(*api, o.device);
  if (!context.status().ok()) die(context.status().to_string());
  Bench bench(o, *api);
  std::uint64_t max_slots_bytes = 0;
  for (auto s : o.sizes) max_slots_bytes = std::max(max_slots_bytes, bench.plan(s).slots * s);
  CUdeviceptr dev = 0;
  if (api->cuMemAlloc_v2(&dev, max_slots_bytes) != CUDA_SUCCESS) die("cuMemAlloc failed");
  char* host_slots = nullptr;  // batch-host's destination, pinned as the device slots' twin
  if (api->cuMemHostAlloc(reinterpret_cast<void**>(&host_slots), max_slots_bytes, 0) != CUDA_SUCCESS) {
    die("cuMemHostAlloc failed");
  }

  std::string json = "[";
  std::printf("%-9s %-9s %12s %12s %12s %10s  %s\n", "size", "mode", "requests", "GB/s", "M req/s", "us/req",
              "bytes checked");
  InFlightTimes in_flight_times;
  for (std::uint64_t size : o.sizes) {
    Plan p = bench.plan(size);
    File& f = bench.file();
    auto slot = [&](std::size_t i) {
      return reinterpret_cast<void*>(static_cast<std::uintptr_t>(dev + (i % p.slots) * p.size));
    };
    // Reads the requests `next` hands out (until it says none are left, past `end`), keeping at most
    // `depth` in flight on this thread; outside checked windows, adds the time spent in pread() and get() to
    // in_flight_times.
    auto read_in_flight = [&](const Plan& pl, std::size_t first, std::size_t end, unsigned depth, bool checking,
                              const std::function<std::size_t()>& next) {
      std::vector<Future> live;
      live.reserve(depth);
      double submitting = 0, waiting = 0;
      std::uint64_t requests = 0, moved = 0;
      std::set<int> seen;
      int last_cpu = -1;
      auto get_oldest = [&] {
        const double t = now_s();
        auto r = live.front().get();
        waiting += now_s() - t;
        if (!r.ok()) die(r.status().to_string());
        live.erase(live.begin());
      };
      for (std::size_t i; (i = next()) < end;) {
        if (live.size() == depth) get_oldest();
        const double t = now_s();
        live.push_back(f.pread(slot(i - first), pl.size, pl.offsets[i]));
        submitting += now_s() - t;
        if (++requests % 256 == 0) {
          const int cpu = sched_getcpu();
          moved += last_cpu >= 0 && cpu != last_cpu;
          seen.insert(last_cpu = cpu);
        }
      }
      while (!live.empty()) get_oldest();
      if (!checking) in_flight_times.add(submitting, waiting, requests, seen, moved);
    };
    std::vector<std::pair<std::string, Runner>> modes;
    modes.emplace_back("ferry", [&](const Plan& pl, std::size_t first, std::size_t count, bool checking) {
      std::size_t next = first;
      read_in_flight(pl, first, first + count, o.in_flight, checking, [&] { return next++; });
    });
    // The same number in flight, submitted from `threads` threads (as the plain loop reads on that many).
    modes.emplace_back("ferry-mt", [&](const Plan& pl, std::size_t first, std::size_t count, bool checking) {
      std::atomic<std::size_t> next{first};
      const unsigned per_thread = std::max(1u, o.in_flight / o.threads);
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < o.threads; ++t) {
        pool.emplace_back([&] {
          read_in_flight(pl, first, first + count, per_thread, checking, [&] { return next.fetch_add(1); });
        });
      }
      for (auto& t : pool) t.join();
    });
    modes.emplace_back("ferry-1", [&](const Plan& pl, std::size_t first, std::size_t count, bool) {
      for (std::size_t i = first; i < first + count; ++i) {
        auto r = f.pread(slot(i - first), pl.size, pl.offsets[i]).get();
        if (!r.ok()) die(r.status().to_string());
      }
    });
    // Batches of an equal share of the slots `at` gives, `batches_in_flight` in flight, each landing in slots
    // of its own; `scattered`: each batch lists its pieces last slot first, so that no piece's destination
    // follows the one before it (pieces in buffers of their own, as a list of tensors would be).
    auto batches = [&](const Plan& pl, std::size_t first, std::size_t count, const std::function<void*(std::size_t)>& at,
                       bool scattered = false) {
      const std::size_t per_batch = std::max<std::size_t>(1, pl.slots / o.batches_in_flight);
      std::vector<Future> live;
      std::vector<std::vector<Piece>> pieces;
      for (std::size_t begin = first; begin < first + count; begin += per_batch) {
        std::size_t n = std::min(per_batch, first + count - begin);
        std::vector<Piece> ps(n);
        for (std::size_t k = 0; k < n; ++k) ps[k] = Piece{at(begin - first + k), pl.size, pl.offsets[begin + k]};
        if (scattered) std::reverse(ps.begin(), ps.end());
        if (live.size() == o.batches_in_flight) {
          auto r = live.front().get();
          if (!r.ok()) die(r.status().to_string());
          live.erase(live.begin());
          pieces.erase(pieces.begin());
        }
        pieces.push_back(std::move(ps));
        live.push_back(f.pread_batch(pieces.back()));
      }
      for (auto& fut : live) {
        auto r = fut.get();
        if (!r.ok()) die(r.status().to_string());
      }
    };
    modes.emplace_back("batch", [&](const Plan& pl, std::size_t first, std::size_t count, bool) {
      batches(pl, first, count, slot);
    });
    modes.emplace_back("batch-scatter", [&](const Plan& pl, std::size_t first, std::size_t count, bool) {
      batches(pl, first, count, slot, true);
    });
    // The same batches into pinned host memory (the host route: pieces read straight into place, nothing
    // copied): what the batch engine reads without the GPU. Checked by moving the slots to the device.
    modes.emplace_back("batch-host", [&](const Plan& pl, std::size_t first, std::size_t count, bool verify) {
      batches(pl, first, count, [&](std::size_t i) { return host_slots + (i % pl.slots) * pl.size; });
      if (verify) (void)api->cuMemcpyHtoD_v2(dev, host_slots, std::min<std::size_t>(count, pl.slots) * pl.size);
    });
    // `ferry_calls`: before each read, also what Ferry asks per request and the loop does not (the file's
    // size by fstat, the destination's kind by cuPointerGetAttributes): what those two calls cost with
    // `threads` threads at once.
    auto plain = [&](unsigned threads, bool ferry_calls = false) {
      return [&, threads, ferry_calls](const Plan& pl, std::size_t first, std::size_t count, bool) {
        std::atomic<std::size_t> next{first};
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < threads; ++t) {
          pool.emplace_back([&] {
            ScopedDeviceContext ctx(*api, o.device);
            void* pinned = nullptr;
            CUstream s = nullptr;
            (void)api->cuMemHostAlloc(&pinned, pl.size, 0);
            (void)api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
            for (std::size_t i; (i = next.fetch_add(1)) < first + count;) {
              if (ferry_calls) ask_like_ferry(f.fileno(), slot(i - first), pl.size);
              if (::pread(f.fileno(), pinned, pl.size, static_cast<off_t>(pl.offsets[i])) != static_cast<ssize_t>(pl.size)) die("pread");
              (void)api->cuMemcpyHtoDAsync_v2(reinterpret_cast<CUdeviceptr>(slot(i - first)), pinned, pl.size, s);
              (void)api->cuStreamSynchronize(s);
            }
            (void)api->cuStreamDestroy_v2(s);
            (void)api->cuMemFreeHost(pinned);
          });
        }
        for (auto& t : pool) t.join();
      };
    };
    // A thread's pinned buffers (on huge pages), stream and an event a buffer, made in a mode's untimed first
    // window and kept (a Ferry batch's are pooled too).
    struct Lane {
      const CudaApi* api = nullptr;
      std::optional<detail::HostMemory> memory;
      CUstream stream = nullptr;
      std::vector<CUevent> copied;
      ~Lane() {
        for (auto& e : copied) (void)api->cuEventDestroy_v2(e);
        if (stream) (void)api->cuStreamDestroy_v2(stream);
        if (memory) (void)api->cuMemHostUnregister(memory->data());
      }
    };
    using Lanes = std::vector<std::unique_ptr<Lane>>;
    // Thread t's lane of `buffers` buffers of `fill` bytes, made when it has none of that shape.
    auto lane_of = [&](Lanes& lanes, unsigned t, std::uint64_t fill, unsigned buffers) -> Lane& {
      auto& lane = lanes[t];
      if (!lane || lane->memory->size_bytes() != fill * buffers) {
        lane.reset();
        lane = std::make_unique<Lane>();
        lane->api = api;
        lane->memory.emplace(detail::HostMemory::allocate(fill * buffers, detail::HostMemory::Touch::now).value());
        if (api->cuMemHostRegister_v2(lane->memory->data(), fill * buffers, 0) != CUDA_SUCCESS) die("cuMemHostRegister");
        (void)api->cuStreamCreate(&lane->stream, CU_STREAM_NON_BLOCKING);
        lane->copied.assign(buffers, nullptr);
        for (auto& e : lane->copied) (void)api->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
      }
      return *lane;
    };
    // Queues the copies of a fill holding pieces [begin, end) of a window starting at `first`: one copy per run
    // of slots that follow one another.
    auto copy_fill = [&](const Plan& pl, std::size_t first, std::size_t begin, std::size_t end,
                         const std::uint8_t* bounce, CUstream stream) {
      for (std::size_t i = begin; i < end;) {
        std::size_t run_end = i + 1;
        while (run_end < end && (run_end - first) % pl.slots != 0) ++run_end;
        (void)api->cuMemcpyHtoDAsync_v2(reinterpret_cast<CUdeviceptr>(slot(i - first)),
                                        bounce + (i - begin) * pl.size, (run_end - i) * pl.size, stream);
        i = run_end;
      }
    };
    // The batch pattern without Ferry: `threads` threads, each reading runs of consecutive pieces (up to a
    // 4 MiB fill) into one of `buffers` pinned bounce buffers on huge pages and copying each run with one
    // cuMemcpyHtoDAsync. With one buffer a thread waits for its copy before it reads on (the shape of a
    // Ferry batch job); with two it reads the next fill while the copy engine moves the last one, with no
    // batch boundaries (plain-batches has them).
    auto plain_fills = [&](unsigned buffers) {
      auto lanes = std::make_shared<Lanes>(o.threads);
      return [&, buffers, lanes](const Plan& pl, std::size_t first, std::size_t count, bool) {
        constexpr std::uint64_t kFill = 4 << 20;
        const std::size_t per_fill = std::max<std::uint64_t>(1, kFill / pl.size);
        const std::uint64_t fill = per_fill * pl.size;
        std::atomic<std::size_t> next{first};
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < o.threads; ++t) {
          pool.emplace_back([&, t] {
            ScopedDeviceContext ctx(*api, o.device);
            Lane* lane = &lane_of(*lanes, t, fill, buffers);
            CUstream s = lane->stream;
            std::vector<bool> busy(buffers, false);
            for (unsigned b = 0;; b = (b + 1) % buffers) {
              const std::size_t begin = next.fetch_add(per_fill);
              if (begin >= first + count) break;
              const std::size_t end = std::min(begin + per_fill, first + count);
              if (busy[b]) (void)api->cuEventSynchronize(lane->copied[b]);
              std::uint8_t* bounce = lane->memory->data() + b * fill;
              for (std::size_t i = begin; i < end; ++i) {
                if (::pread(f.fileno(), bounce + (i - begin) * pl.size, pl.size, static_cast<off_t>(pl.offsets[i])) !=
                    static_cast<ssize_t>(pl.size)) {
                  die("pread");
                }
              }
              copy_fill(pl, first, begin, end, bounce, s);
              (void)api->cuEventRecord(lane->copied[b], s);
              busy[b] = true;
              if (buffers == 1) (void)api->cuEventSynchronize(lane->copied[b]), busy[b] = false;
            }
            (void)api->cuStreamSynchronize(s);
          });
        }
        for (auto& t : pool) t.join();
      };
    };
    // plain-pipe in batches, as the batch mode sends them: `batches_in_flight` batches of the batch mode's size
    // published at a time, the next one once the oldest one's copies have all ended. Threads read fills of the
    // published batches into their two buffers (a fill never spans two batches) and look at their copies in
    // flight after every piece and while they wait for work, so a batch is known done about a piece's read
    // after its last copy: what a batch engine whose workers keep their buffers between batches could reach.
    auto plain_batches = [&] {
      auto lanes = std::make_shared<Lanes>(o.threads);
      return [&, lanes](const Plan& pl, std::size_t first, std::size_t count, bool) {
        constexpr std::uint64_t kFill = 4 << 20;
        const std::size_t per_batch = std::max<std::size_t>(1, pl.slots / o.batches_in_flight);
        const std::size_t per_fill = std::clamp<std::size_t>(kFill / pl.size, 1, per_batch);
        const std::size_t fills_per_batch = (per_batch + per_fill - 1) / per_fill;
        const std::size_t batches = (count + per_batch - 1) / per_batch;
        const std::size_t fills = batches * fills_per_batch;
        auto fills_in = [&](std::size_t b) {
          const std::size_t n = std::min(per_batch, count - b * per_batch);
          return (n + per_fill - 1) / per_fill;
        };
        std::vector<std::atomic<std::size_t>> fills_done(batches);
        for (auto& d : fills_done) d.store(0);
        std::atomic<std::size_t> published{0}, next_fill{0};
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < o.threads; ++t) {
          pool.emplace_back([&, t] {
            ScopedDeviceContext ctx(*api, o.device);
            Lane& lane = lane_of(*lanes, t, per_fill * pl.size, 2);
            std::size_t pending[2] = {SIZE_MAX, SIZE_MAX};  // the batch of each buffer's copy in flight
            auto settle = [&](unsigned b, bool wait) {
              if (pending[b] == SIZE_MAX) return;
              if (wait) (void)api->cuEventSynchronize(lane.copied[b]);
              else if (api->cuEventQuery(lane.copied[b]) != CUDA_SUCCESS) return;
              fills_done[pending[b]].fetch_add(1);
              pending[b] = SIZE_MAX;
            };
            for (unsigned b = 0;; b ^= 1) {
              std::size_t fi = next_fill.load();
              for (;;) {  // claim a fill of a published batch, looking at the copies meanwhile
                if (fi >= fills) break;
                if (fi / fills_per_batch < published.load() && fi % fills_per_batch < fills_in(fi / fills_per_batch)) {
                  if (next_fill.compare_exchange_weak(fi, fi + 1)) break;
                  continue;
                }
                if (fi % fills_per_batch >= fills_in(fi / fills_per_batch)) {  // the last batch's missing fills
                  if (next_fill.compare_exchange_weak(fi, fi + 1)) fi = next_fill.load();
                  continue;
                }
                settle(0, false), settle(1, false);
                std::this_thread::yield();
                fi = next_fill.load();
              }
              if (fi >= fills) break;
              const std::size_t batch = fi / fills_per_batch;
              const std::size_t begin = first + batch * per_batch + (fi % fills_per_batch) * per_fill;
              const std::size_t end = std::min({begin + per_fill, first + (batch + 1) * per_batch, first + count});
              settle(b, true);
              std::uint8_t* bounce = lane.memory->data() + b * per_fill * pl.size;
              for (std::size_t i = begin; i < end; ++i) {
                if (::pread(f.fileno(), bounce + (i - begin) * pl.size, pl.size, static_cast<off_t>(pl.offsets[i])) !=
                    static_cast<ssize_t>(pl.size)) {
                  die("pread");
                }
                settle(b ^ 1, false);
              }
              copy_fill(pl, first, begin, end, bounce, lane.stream);
              (void)api->cuEventRecord(lane.copied[b], lane.stream);
              pending[b] = batch;
            }
            settle(0, true), settle(1, true);
          });
        }
        for (std::size_t b = 0; b < batches; ++b) {  // publish, keeping batches_in_flight in flight
          if (b >= o.batches_in_flight) {
            const std::size_t oldest = b - o.batches_in_flight;
            while (fills_done[oldest].load() < fills_in(oldest)) std::this_thread::yield();
          }
          published.store(b + 1);
        }
        for (auto& t : pool) t.join();
      };
    };
    modes.emplace_back("plain-batches", plain_batches());
    modes.emplace_back("plain-fill", plain_fills(1));
    modes.emplace_back("plain-pipe", plain_fills(2));
    modes.emplace_back("plain", plain(o.threads));
    modes.emplace_back("plain-1", plain(1));
    modes.emplace_back("plain-calls", plain(o.threads, true));
    modes.emplace_back("plain-calls-1", plain(1, true));
    // The plain loop's reads with their copies combined across threads: a thread whose read is done lists
    // its copy, and a thread that finds nobody issuing copies issues every listed one with one
    // cuMemcpyBatchAsync on one shared stream and records an event; each thread then waits for the event
    // of the batch its copy went in. Whether one batched copy for many concurrent requests beats one copy
    // each (issue 21's in-flight goal) before Ferry's engine is shaped for it.
    auto combiner = std::make_shared<CopyCombiner>(*api);
    modes.emplace_back("plain-combined", [&, combiner](const Plan& pl, std::size_t first, std::size_t count, bool) {
      if (!combiner->available()) die("the driver has no cuMemcpyBatchAsync_v2");
      std::atomic<std::size_t> next{first};
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < o.threads; ++t) {
        pool.emplace_back([&] {
          ScopedDeviceContext ctx(*api, o.device);
          void* pinned = nullptr;
          (void)api->cuMemHostAlloc(&pinned, pl.size, 0);
          for (std::size_t i; (i = next.fetch_add(1)) < first + count;) {
            if (::pread(f.fileno(), pinned, pl.size, static_cast<off_t>(pl.offsets[i])) != static_cast<ssize_t>(pl.size)) die("pread");
            combiner->copy(reinterpret_cast<CUdeviceptr>(slot(i - first)), pinned, pl.size);
          }
          (void)api->cuMemFreeHost(pinned);
        });
      }
      for (auto& t : pool) t.join();
    });
    // The same loop from pageable memory: whether the driver's own path for small pageable copies beats
    // a pinned buffer's copy-engine operation one request at a time.
    modes.emplace_back("pageable-1", [&](const Plan& pl, std::size_t first, std::size_t count, bool) {
      std::vector<char> host(pl.size);
      CUstream s = nullptr;
      (void)api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
      for (std::size_t i = first; i < first + count; ++i) {
        if (::pread(f.fileno(), host.data(), pl.size, static_cast<off_t>(pl.offsets[i])) != static_cast<ssize_t>(pl.size)) die("pread");
        (void)api->cuMemcpyHtoDAsync_v2(reinterpret_cast<CUdeviceptr>(slot(i - first)), host.data(), pl.size, s);
        (void)api->cuStreamSynchronize(s);
      }
      (void)api->cuStreamDestroy_v2(s);
    });
    modes.emplace_back("raw-host", [&](const Plan& pl, std::size_t first, std::size_t count, bool verify) {
      if (verify) {  // the host read is the reference itself: land it on the device to check it too
        plain(o.threads)(pl, first, count, true);
        return;
      }
      std::atomic<std::size_t> next{first};
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < o.threads; ++t) {
        pool.emplace_back([&] {
          detail::UniqueFd fd(::open(o.path.c_str(), O_RDONLY | (o.cold ? O_DIRECT : 0)));
          detail::HostMemory buf = detail::HostMemory::allocate(pl.size).value();
          for (std::size_t i; (i = next.fetch_add(1)) < first + count;) {
            (void)!::pread(fd.get(), buf.data(), pl.size, static_cast<off_t>(pl.offsets[i]));
          }
        });
      }
      for (auto& t : pool) t.join();
    });
    for (auto& [name, run] : modes) {
      if (!o.modes.empty() && std::find(o.modes.begin(), o.modes.end(), name) == o.modes.end()) continue;
      in_flight_times.reset();
      // One-at-a-time modes get fewer requests: latency, not throughput, is what they show.
      Plan q = p;
      if (name.back() == '1') q.offsets.resize(std::min<std::size_t>(q.offsets.size(), o.latency_requests));
      ModeResult r = bench.measure(name, q, dev, run);
      double gbps = static_cast<double>(r.bytes) / r.seconds / 1e9;
      double mreq = static_cast<double>(r.requests) / r.seconds / 1e6;
      double us = r.seconds / static_cast<double>(r.requests) * 1e6;
      std::printf("%-9s %-9s %12llu %12.2f %12.3f %10.1f  %s\n", format_size(size).c_str(), name.c_str(),
                  static_cast<unsigned long long>(r.requests), gbps, mreq, us,
                  r.verified ? "all" : ("FAILED: " + r.error).c_str());
      const double n = static_cast<double>(r.requests);
      std::printf("          (per request: cpu %.1f us, %.2f voluntary and %.2f involuntary context switches, "
                  "the machine's steal %.1f us",
                  r.cpu_seconds / n * 1e6, static_cast<double>(r.voluntary_switches) / n,
                  static_cast<double>(r.involuntary_switches) / n, r.steal_seconds / n * 1e6);
      if (name == "ferry" || name == "ferry-mt") {
        std::printf("; submitting %.1f us, waiting %.1f us a request a thread; seen on CPUs %s, %llu moves",
                    in_flight_times.submit_us(), in_flight_times.wait_us(), in_flight_times.cpus_text().c_str(),
                    static_cast<unsigned long long>(in_flight_times.moves));
      }
      if (name.rfind("ferry", 0) == 0 || name == "batch") {
        std::printf("; %.3f pool jobs and %.3f ops taken with others' a request", static_cast<double>(r.pool_jobs) / n,
                    static_cast<double>(r.gathered_ops) / n);
      }
      std::printf(")\n");
      if (name == "plain-combined") std::printf("          (%.1f copies per batched copy)\n", combiner->take_copies_per_batch());
      std::fflush(stdout);
      json += fmt::format("{}{{\"size\":{},\"mode\":\"{}\",\"cache\":\"{}\",\"requests\":{},\"seconds\":{:.6f},"
                          "\"gb_per_s\":{:.4f},\"m_requests_per_s\":{:.4f},\"us_per_request\":{:.2f},"
                          "\"verified\":{},\"in_flight\":{},\"batches_in_flight\":{},\"batch_bytes\":{},\"threads\":{},"
                          "\"cpu_seconds\":{:.6f},\"voluntary_switches\":{},\"involuntary_switches\":{},"
                          "\"steal_seconds\":{:.6f},\"pool_jobs\":{},\"gathered_ops\":{}}}",
                          json.size() > 1 ? "," : "", size, name, o.cold ? "cold" : "hot", r.requests, r.seconds,
                          gbps, mreq, us, r.verified ? "true" : "false", o.in_flight, o.batches_in_flight, o.batch_bytes, o.threads,
                          r.cpu_seconds, r.voluntary_switches, r.involuntary_switches, r.steal_seconds, r.pool_jobs,
                          r.gathered_ops);
    }
  }
  json += "]\n";
  if (!o.json_out.empty()) {
    FILE* out = std::fopen(o.json_out.c_str(), "w");
    if (out) {
      std::fputs(json.c_str(), out);
      std::fclose(out);
    }
  }
  (void)api->cuMemFreeHost(host_slots);
  (void)api->cuMemFree_v2(dev);
  return 0;
}
