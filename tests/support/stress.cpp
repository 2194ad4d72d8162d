// run_stress: worker threads, their regions and buffers, and the byte-for-byte checks.
#include "support/stress.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "ferry/ferry.hpp"
#include "file/open_options.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/test_files.hpp"

namespace ferry::testing {
namespace {

constexpr std::uint8_t kGuard = 0xC3;
constexpr std::uint64_t kGuardBytes = 4096;

struct Shared {
  const StressOptions& o;
  const detail::CudaApi* cuda = nullptr;
  std::vector<std::vector<File>> files;  // [file][policy]
  std::vector<std::uint64_t> file_sizes;
  std::atomic<std::uint64_t> requests{0}, reads{0}, writes{0}, batches{0}, device_requests{0}, bytes{0};
  std::atomic<std::uint64_t> wrong_bytes{0}, errors{0};
  std::atomic<std::uint64_t> routes[kRouteCount] = {};
  std::atomic<bool> stop{false};
  std::atomic<unsigned> running{0};
  std::mutex failure_mutex;
  std::string first_failure;

  void fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (first_failure.empty()) first_failure = what;
  }
};

// One thread's device memory: guard bytes, then room for the largest request, then guard bytes.
class DeviceArea {
 public:
  DeviceArea(const detail::CudaApi& api, int device, std::uint64_t bytes) : api_(api), device_(device), bytes_(bytes) {
    status_ = detail::make_current(api_, device_);
    if (status_.ok()) status_ = detail::cuda_check(api_, api_.cuMemAlloc_v2(&base_, bytes_), "cuMemAlloc");
  }
  ~DeviceArea() {
    if (base_ && detail::make_current(api_, device_).ok()) (void)api_.cuMemFree_v2(base_);
  }
  const Status& status() const { return status_; }
  void* at(std::uint64_t offset) const { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(base_ + offset)); }
  Status upload(const std::uint8_t* src, std::uint64_t offset, std::uint64_t n) {
    FERRY_RETURN_IF_ERROR(detail::make_current(api_, device_));
    return detail::cuda_check(api_, api_.cuMemcpyHtoD_v2(base_ + offset, src, n), "cuMemcpyHtoD");
  }
  Status download(std::uint8_t* dst, std::uint64_t offset, std::uint64_t n) {
    FERRY_RETURN_IF_ERROR(detail::make_current(api_, device_));
    return detail::cuda_check(api_, api_.cuMemcpyDtoH_v2(dst, base_ + offset, n), "cuMemcpyDtoH");
  }

 private:
  const detail::CudaApi& api_;
  int device_;
  std::uint64_t bytes_;
  detail::CUdeviceptr base_ = 0;
  Status status_;
};

// Leaves the calling thread as a user's thread would be: even threads with no current context at all,
// odd ones with GPU 0's context current (whatever GPU their buffers are on).
void set_caller_context(const detail::CudaApi& api, unsigned thread) {
  if (thread % 2 == 0) {
    (void)api.cuCtxSetCurrent(nullptr);
  } else {
    (void)detail::make_current(api, 0);
  }
}

void worker(Shared& sh, unsigned t) {
  const StressOptions& o = sh.o;
  std::mt19937_64 rng(o.seed * 1000003 + t);
  const std::uint64_t max_request = 3 * o.task_size + 4097;
  const std::uint64_t area = kGuardBytes + max_request + kGuardBytes;
  const int device = o.devices.empty() ? 0 : o.devices[t % o.devices.size()];
  std::unique_ptr<DeviceArea> dev;
  if (sh.cuda != nullptr && o.device_percent > 0) {
    dev = std::make_unique<DeviceArea>(*sh.cuda, device, area);
    if (!dev->status().ok()) {
      sh.fail(fmt::format("seed {}, thread {}: device memory on GPU {}: {}", o.seed, t, device,
                          dev->status().to_string()));
      return;
    }
    // Every byte of the area starts as a guard byte.
    std::vector<std::uint8_t> guard(area, kGuard);
    if (!dev->upload(guard.data(), 0, area).ok()) return sh.fail("upload of guard bytes failed");
  }
  std::vector<std::uint8_t> host(area, kGuard), check(area), data(max_request);
  // The model of this thread's region of every file: what the file holds there.
  std::vector<std::vector<std::uint8_t>> model;
  for (std::size_t f = 0; f < sh.files.size(); ++f) {
    std::uint64_t begin = t * o.region_bytes;
    model.push_back(pattern(begin, o.region_bytes));
  }
  for (std::uint64_t n = 0; !sh.stop.load(std::memory_order_relaxed); ++n) {
    if (sh.requests.fetch_add(1) >= o.max_requests) break;
    const std::size_t fi = rng() % sh.files.size();
    const std::size_t pi = rng() % sh.files[fi].size();
    File& file = sh.files[fi][pi];
    const bool on_device = dev && rng() % 100 < o.device_percent;
    const bool is_write = o.write && rng() % 2 == 0;
    const std::uint64_t region_begin = t * o.region_bytes;
    const bool last_region = t + 1 == o.threads;
    // Reads in the last region may run past the end of the file; writes stay inside the region.
    std::uint64_t in_region = rng() % o.region_bytes;
    std::uint64_t size = 1 + rng() % max_request;
    if (is_write || !last_region) size = std::min(size, o.region_bytes - in_region);
    const std::uint64_t offset = region_begin + in_region;
    const std::uint64_t buffer_offset = kGuardBytes + rng() % 64;  // unaligned destinations too
    std::string where = fmt::format("seed {}, thread {}, request {} ({} {} bytes at offset {} of file {} with compat "
                                    "{}, {} memory)",
                                    o.seed, t, n, is_write ? "write" : "read", size, offset, fi,
                                    compat_mode_name(o.policies[pi]), on_device ? "device" : "host");
    if (on_device) set_caller_context(*sh.cuda, t);
    void* buffer = on_device ? dev->at(buffer_offset) : host.data() + buffer_offset;
    Result<Transfer> r = Status(ErrorCode::internal, "not run");
    if (is_write) {
      for (std::uint64_t i = 0; i < size; ++i) data[i] = static_cast<std::uint8_t>(rng());
      if (on_device) {
        if (!dev->upload(data.data(), buffer_offset, size).ok()) return sh.fail(where + ": upload failed");
        set_caller_context(*sh.cuda, t);
      } else {
        std::memcpy(host.data() + buffer_offset, data.data(), size);
      }
      r = file.pwrite(buffer, size, offset).get();
      if (r.ok()) std::memcpy(model[fi].data() + in_region, data.data(), size);
    } else if (rng() % 100 < o.batch_percent) {
      // The same bytes as a batch of up to eight pieces side by side (pieces past the file's end read less).
      std::vector<Piece> pieces;
      for (std::uint64_t at = 0; at < size;) {
        const std::uint64_t n = pieces.size() == 7 ? size - at : std::min(size - at, 1 + rng() % (size / 4 + 1));
        pieces.push_back(Piece{static_cast<char*>(buffer) + at, n, offset + at});
        at += n;
      }
      where += fmt::format(" as a batch of {} pieces", pieces.size());
      r = file.pread_batch(pieces).get();
      ++sh.batches;
    } else {
      r = file.pread(buffer, size, offset).get();
    }
    ++(is_write ? sh.writes : sh.reads);
    if (on_device) ++sh.device_requests;
    if (on_device) {
      // Ferry must leave the caller's thread on the context it found there.
      detail::CUcontext now = nullptr, want = nullptr;
      (void)sh.cuda->cuCtxGetCurrent(&now);
      if (t % 2 == 1) want = *detail::primary_context(*sh.cuda, 0);
      if (now != want) {
        ++sh.errors;
        sh.fail(where + ": the caller's current CUDA context was changed");
      }
    }
    if (!r.ok()) {
      ++sh.errors;
      sh.fail(where + ": " + r.status().to_string());
      continue;
    }
    for (std::size_t i = 0; i < kRouteCount; ++i) sh.routes[i] += r->report.routes[i].ops;
    sh.bytes += r->bytes;
    const std::uint64_t file_end = sh.file_sizes[fi];
    const std::uint64_t expect = is_write ? size : std::min(size, file_end - offset);
    if (r->bytes != expect) {
      sh.fail(fmt::format("{}: {} bytes moved, expected {}", where, r->bytes, expect));
      ++sh.wrong_bytes;
    }
    if (is_write) {
      // The buffer of a write must be left as it was; the file's bytes are checked by later reads.
      if (!on_device) std::memcpy(host.data() + buffer_offset, std::vector<std::uint8_t>(size, kGuard).data(), size);
      else if (!dev->upload(std::vector<std::uint8_t>(size, kGuard).data(), buffer_offset, size).ok()) return;
      continue;
    }
    // Check the whole area: the bytes read, and every guard byte around them.
    if (on_device) {
      if (!dev->download(check.data(), 0, area).ok()) return sh.fail(where + ": download failed");
    } else {
      std::memcpy(check.data(), host.data(), area);
    }
    std::uint64_t wrong = 0, first_wrong = UINT64_MAX;
    for (std::uint64_t i = 0; i < area; ++i) {
      std::uint8_t want = kGuard;
      if (i >= buffer_offset && i < buffer_offset + r->bytes) {
        std::uint64_t at = in_region + (i - buffer_offset);
        want = at < o.region_bytes ? model[fi][at] : pattern_byte(offset + (i - buffer_offset));
      }
      if (check[i] != want) {
        ++wrong;
        first_wrong = std::min(first_wrong, i);
      }
    }
    if (wrong) {
      sh.wrong_bytes += wrong;
      sh.fail(fmt::format("{}: {} wrong byte(s), the first at {} of the destination ({} guard bytes before it)",
                          where, wrong, static_cast<std::int64_t>(first_wrong - buffer_offset), buffer_offset));
    }
    // Put the guard bytes back where the data went.
    if (on_device) {
      if (!dev->upload(std::vector<std::uint8_t>(size, kGuard).data(), buffer_offset, size).ok()) return;
    } else {
      std::memset(host.data() + buffer_offset, kGuard, size);
    }
  }
}

}  // namespace

std::string StressOutcome::summary() const {
  std::string routes;
  for (std::size_t i = 0; i < kRouteCount; ++i) {
    if (ops_by_route[i]) routes += fmt::format(" {}={}", route_name(static_cast<Route>(i)), ops_by_route[i]);
  }
  return fmt::format("{} requests ({} reads, of which {} batches; {} writes, {} with device memory), {} bytes, {:.1f} s, "
                     "{} wrong bytes, {} errors; operations:{}{}",
                     requests, reads, batches, writes, device_requests, bytes, seconds, wrong_bytes, errors, routes,
                     first_failure.empty() ? "" : "; first failure: " + first_failure);
}

StressOutcome run_stress(const StressOptions& o) {
  Shared sh{o};
  StressOutcome out;
  Status why;
  const detail::GpuPlatform& gpu = o.gpu ? *o.gpu : detail::process_gpu_platform();
  sh.cuda = gpu.cuda(&why);
  const std::uint64_t file_size = o.threads * o.region_bytes;
  for (unsigned f = 0; f < o.files; ++f) {
    std::string path = write_pattern_file(o.dir / fmt::format("stress-{}.bin", f), file_size);
    sh.file_sizes.push_back(file_size);
    sh.files.emplace_back();
    for (CompatMode policy : o.policies) {
      Config c;
      c.set_compat_mode(policy).set_task_size(o.task_size).set_threads(o.ferry_threads);
      c.set_bounce_buffer_size(o.bounce_buffer_size != 0 ? o.bounce_buffer_size : o.task_size);
      detail::OpenOptions opts;
      opts.gpu = o.gpu;
      auto file = detail::open_file(path, "r+", c, opts);
      if (!file.ok()) {
        out.first_failure = "open: " + file.status().to_string();
        return out;
      }
      sh.files.back().push_back(std::move(*file));
    }
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  sh.running = o.threads;
  for (unsigned t = 0; t < o.threads; ++t) {
    threads.emplace_back([&sh, t] {
      worker(sh, t);
      --sh.running;
    });
  }
  auto last_tick = start;
  while (sh.running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto now = std::chrono::steady_clock::now();
    if (now - start >= o.max_time) break;
    if (o.on_tick && now - last_tick >= std::chrono::seconds(1)) {
      o.on_tick(sh.reads + sh.writes, sh.bytes);
      last_tick = now;
    }
  }
  sh.stop = true;
  for (auto& th : threads) th.join();
  for (auto& per_path : sh.files) {
    for (File& f : per_path) (void)f.close();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.reads = sh.reads;
  out.batches = sh.batches;
  out.writes = sh.writes;
  out.requests = out.reads + out.writes;
  out.device_requests = sh.device_requests;
  out.bytes = sh.bytes;
  out.wrong_bytes = sh.wrong_bytes;
  out.errors = sh.errors;
  for (std::size_t i = 0; i < kRouteCount; ++i) out.ops_by_route[i] = sh.routes[i];
  out.first_failure = sh.first_failure;
  return out;
}

}  // namespace ferry::testing
