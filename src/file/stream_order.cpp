// Stream-ordered requests: the choice of mechanism, and what the caller's thread queues on its stream.
#include "file/stream_order.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "backends/staging_pool.hpp"
#include "base/fork_guard.hpp"
#include "engine/request.hpp"
#include "engine/task_split.hpp"
#include "engine/thread_pool.hpp"
#include "file/file_state.hpp"
#include "file/route_selection.hpp"
#include "file/stream_request.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/gpu_platform.hpp"
#include "report/process_report.hpp"

namespace ferry::detail {

// StreamWords' members that call the driver, all on the caller's thread.
StreamWords::~StreamWords() {
  for (void* page : pages_) (void)api_.cuMemFreeHost(page);
}

Result<std::pair<StreamWord, StreamWord>> StreamWords::acquire() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() < 2) FERRY_RETURN_IF_ERROR(add_page());
  std::pair<StreamWord, StreamWord> taken{free_.back(), free_[free_.size() - 2]};
  free_.resize(free_.size() - 2);
  taken.first.host->store(0, std::memory_order_relaxed);
  taken.second.host->store(0, std::memory_order_relaxed);
  return taken;
}

Status StreamWords::add_page() {
  void* host = nullptr;
  FERRY_RETURN_IF_ERROR(cuda_check(api_, api_.cuMemHostAlloc(&host, kPageBytes, kMemHostAllocPortable | kMemHostAllocDeviceMap),
                                   "cuMemHostAlloc of the words streams wait on"));
  CUdeviceptr device = 0;
  Status mapped = cuda_check(api_, api_.cuMemHostGetDevicePointer_v2(&device, host, 0), "cuMemHostGetDevicePointer");
  if (!mapped.ok()) {
    (void)api_.cuMemFreeHost(host);
    return mapped;
  }
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
  auto* words = static_cast<std::atomic<std::uint32_t>*>(host);
  constexpr std::size_t kWords = kPageBytes / sizeof(std::uint32_t);
  for (std::size_t i = kWords; i > 0; --i) {
    new (&words[i - 1]) std::atomic<std::uint32_t>(0);
    free_.push_back(StreamWord{&words[i - 1], device + (i - 1) * sizeof(std::uint32_t)});
  }
  pages_.push_back(host);
  return Status();
}

namespace {

// The words of every driver table. Never destroyed: a request may finish on the watcher while statics are torn
// down at exit.
struct AllWords {
  std::mutex mutex;
  std::map<const CudaApi*, std::unique_ptr<StreamWords>> of;  // guarded by mutex
};
constinit std::atomic<AllWords*> g_all_words{nullptr};

StreamWords& words_for(const CudaApi& api) {
  AllWords& all = made_once(g_all_words, [] { return new AllWords; });
  std::lock_guard<std::mutex> lock(all.mutex);
  auto& slot = all.of[&api];
  if (!slot) slot = std::make_unique<StreamWords>(api);
  return *slot;
}

// The context of `stream`, which the caller's thread makes current while it queues the request.
Result<CUcontext> stream_context(const CudaApi& api, CUstream stream) {
  CUcontext context = nullptr;
  CUresult got = api.cuStreamGetCtx(stream, &context);
  const auto handle = reinterpret_cast<std::uintptr_t>(stream);
  if (got == CUDA_ERROR_INVALID_CONTEXT && handle <= 2) {
    // The special handles (0 and 1: the legacy default stream, 2: the per-thread one) mean "of the
    // context current on this thread", and there is none.
    return Status(ErrorCode::invalid_argument,
                  fmt::format("stream {} is a default stream, which belongs to the CUDA context current on the "
                              "calling thread, and none is current: make one current (cudaSetDevice, "
                              "cuCtxSetCurrent) or pass a stream you created",
                              handle));
  }
  FERRY_RETURN_IF_ERROR(cuda_check(api, got, "cuStreamGetCtx (the stream given to a stream-ordered request)"));
  return context;
}

// The calling thread synchronises the stream, then does the request as pread/pwrite would and waits for
// it: nothing of Ferry's is ever queued on the stream, so nothing can wait for Ferry there.
Future synchronized_request(FileState& file, const CudaApi& api, const RequestLabel& label, void* buffer,
                            const std::string& why) {
  auto stream = static_cast<CUstream>(label.stream);
  Status synced = cuda_check(api, api.cuStreamSynchronize(stream), "cuStreamSynchronize");
  if (!synced.ok()) return done_future(label.error(synced));
  Result<Transfer> result = file.submit(label.direction, buffer, label.size, label.offset).get();
  // Counted in the File's and the process's reports, and in the request's own.
  Report counted;
  counted.stream_order[static_cast<std::size_t>(StreamOrder::synchronized)] = 1;
  counted.add_note("stream order: synchronized: " + why);
  file.add_to_report(counted);
  add_to_process_report(counted);
  if (result.ok()) result->report.merge(counted);
  return done_future(std::move(result));
}

// Why a request cannot have its work ordered by stream memory operations (then it is synchronized), or
// empty when it can.
std::string why_synchronized(const CudaApi& api, const RoutePlanDetail& plan, const Extent& extent,
                             CUcontext stream_context) {
  if (Status s = api.stream_memory_ops_status(); !s.ok()) return s.message();
  const Route route = plan.decision.route;
  if (route != Route::host && route != Route::staged) {
    return fmt::format("the route is cuFile's ({}), whose calls into the CUDA driver could wait for the stream "
                       "while the stream waits for them",
                       route_name(route));
  }
  if (!extent.known) return "the source's size is unknown, so the copies cannot be planned before it is read";
  if (route == Route::staged) {
    auto primary = primary_context(api, plan.buffer.device);
    if (!primary.ok() || *primary != stream_context) {
      return fmt::format("the buffer is on GPU {}, and the stream is not of that GPU's primary context",
                         plan.buffer.device);
    }
  }
  return {};
}

// The run of pieces that begins at `first` and moves in one copy (docs/stream-order.md), up to kMaxCopyRun
// bytes: a wait, copy and write per 4 MiB ran 7% below the copy ceiling, per 16 MiB 2% (on the H200,
// bench/results/2026-12-01-h200-stream-copy-runs).
constexpr std::uint64_t kMaxCopyRun = 16u << 20;

struct CopyRun {
  std::size_t last = 0;    // the run's last piece
  std::uint64_t bytes = 0;  // all its pieces' bytes
};

CopyRun copy_run_from(const StreamRequest& r, std::size_t first) {
  const std::size_t window = r.slots.size();
  CopyRun run{first, r.tasks[first].length};
  while (run.last + 1 < r.tasks.size()) {
    const Task& t = r.tasks[run.last];
    const Task& next = r.tasks[run.last + 1];
    const bool slots_adjacent =
        static_cast<char*>(r.slots[run.last % window]) + t.length == r.slots[(run.last + 1) % window];
    const bool bytes_adjacent = t.buffer_offset + t.length == next.buffer_offset;
    if (!slots_adjacent || !bytes_adjacent || run.bytes + next.length > kMaxCopyRun) break;
    run.bytes += next.length;
    ++run.last;
  }
  return run;
}

// Queues the request's commands on the stream. Returns the last value of the gpu word queued (0: nothing was
// queued) and, where queueing failed part-way, the error (the part queued still runs, and the stream must be
// let through it).
struct Queued {
  std::uint32_t gpu_final = 0;
  Status error;
};

Queued queue_commands(const CudaApi& api, CUstream stream, const StreamRequest& r, CUdeviceptr device_base) {
  Queued q;
  const std::size_t n = r.tasks.size();
  const std::size_t window = r.slots.size();
  // Whether the command `what` was queued; where it was refused, the error says how far the queueing got.
  auto queued = [&](CUresult rc, const char* what) {
    if (rc == CUDA_SUCCESS) return true;
    q.error = cuda_check(api, rc, fmt::format("{} (after {} of the request's commands were queued)", what,
                                              q.gpu_final > 0 ? "some" : "none"));
    return false;
  };
  auto write = [&](std::uint32_t value) {
    CUresult rc = api.cuStreamWriteValue32_v2(stream, r.gpu.device, value, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (!queued(rc, "cuStreamWriteValue32")) return false;
    q.gpu_final = value;
    return true;
  };
  auto wait = [&](std::size_t value) {
    return queued(api.cuStreamWaitValue32_v2(stream, r.cpu.device, static_cast<std::uint32_t>(value),
                                             CU_STREAM_WAIT_VALUE_GEQ),
                  "cuStreamWaitValue32");
  };
  if (!write(1)) return q;
  const bool reading = is_read(r.label.direction);
  for (std::size_t first = 0; first < n && r.mechanism == StreamOrder::stream_copies;) {
    const auto [last, bytes] = copy_run_from(r, first);
    void* slot = r.slots[first % window];
    CUdeviceptr at = device_base + r.tasks[first].buffer_offset;
    if (reading) {
      if (!wait(last + 1) || !queued(api.cuMemcpyHtoDAsync_v2(at, slot, bytes, stream), "cuMemcpyHtoDAsync")) {
        return q;
      }
    } else {
      // Every slot of the run has been written out from its previous use.
      if (last >= window && !wait(last - window + 1)) return q;
      if (!queued(api.cuMemcpyDtoHAsync_v2(slot, at, bytes, stream), "cuMemcpyDtoHAsync")) return q;
    }
    if (!write(static_cast<std::uint32_t>(last + 2))) return q;
    first = last + 1;
  }
  if (r.mechanism == StreamOrder::stream_wait || !reading) {
    // The stream goes on once every step ended: the host buffer is filled, or the file written.
    if (!wait(n) || !write(q.gpu_final + 1)) return q;
  }
  return q;
}

// Refuses a stream that is being captured into a CUDA graph: Ferry's reads happen on the CPU, outside any
// graph, so a captured request could never be replayed, and its waits would stall the capture's replay.
Status check_not_capturing(const CudaApi& api, CUstream stream) {
  if (api.cuStreamIsCapturing == nullptr) return Status();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult rc = api.cuStreamIsCapturing(stream, &capture);
  if (rc == CUDA_SUCCESS && capture == CU_STREAM_CAPTURE_STATUS_NONE) return Status();
  if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_STREAM_CAPTURE_IMPLICIT && rc != CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
    return cuda_check(api, rc, "cuStreamIsCapturing");
  }
  return Status(ErrorCode::failed_precondition,
                "the stream is being captured into a CUDA graph, and a stream-ordered request cannot be captured "
                "(Ferry reads and writes on the CPU, outside the graph): queue it before the capture begins or "
                "after it ends, or read with pread() and copy in the graph");
}

}  // namespace

Future submit_on_stream(FileState& file, Direction direction, void* buffer, std::uint64_t size, std::uint64_t offset,
                        void* stream_handle) {
  RequestLabel label{direction, size, offset, file.path, stream_handle};
  auto fail = [&](const Status& why) { return done_future(label.error(why)); };
  if (Status s = file.check_request(direction, buffer, size, offset); !s.ok()) {
    return done_future(s);
  }
  const GpuPlatform& gpu = file.gpu ? *file.gpu : process_gpu_platform();
  Status why;
  const CudaApi* api = gpu.cuda(&why);
  if (api == nullptr) return fail(why);
  if (Status s = api->stream_ordering_status(); !s.ok()) return fail(s);
  auto stream = static_cast<CUstream>(stream_handle);
  auto context = stream_context(*api, stream);
  if (!context.ok()) return fail(context.status());
  ScopedDeviceContext current(*api, *context);
  if (!current.status().ok()) return fail(current.status());
  if (Status s = check_not_capturing(*api, stream); !s.ok()) return fail(s);

  // Everything that may call the driver happens here, on the caller's thread, before anything is queued:
  // the extent, the route, the bounce slots, the words.
  auto extent = file.extent_for(direction, offset, size);
  if (!extent.ok()) return done_future(extent.status());
  label.size = size;
  auto plan = route_for(file, buffer, size);
  if (!plan.ok()) return done_future(plan.status());
  if (std::string reason = why_synchronized(*api, *plan, *extent, *context); !reason.empty()) {
    return synchronized_request(file, *api, label, buffer, reason);
  }

  auto r = std::make_shared<StreamRequest>();
  r->file = file.shared_from_this();
  r->mechanism = plan->decision.route == Route::host ? StreamOrder::stream_wait : StreamOrder::stream_copies;
  r->label = label;
  r->decision = plan->decision;
  r->source_request = SourceRequest{direction, *extent, size};
  r->buffer = static_cast<char*>(buffer);
  const Config& config = file.config;
  r->max_parallel = std::max(1u, config.threads());
  const bool copies = r->mechanism == StreamOrder::stream_copies;
  const std::uint64_t chunk = copies ? std::min(config.task_size(), config.bounce_buffer_size()) : config.task_size();
  r->tasks = split_request(offset, size, chunk, file.source->task_alignment());
  if (r->tasks.empty()) {  // nothing to move: the request is over before the stream gets there
    Transfer empty;
    empty.report.stream_order[static_cast<std::size_t>(r->mechanism)] = 1;
    file.add_to_report(empty.report);  // counted as every stream-ordered request is
    add_to_process_report(empty.report);
    return done_future(std::move(empty));
  }
  if (copies) {
    // Two slots per thread keep every thread reading while the stream copies; never more than the steps, nor
    // than half the pinned budget (so others find room too). All kits at once: a request holding some while
    // it waited for the rest could wait for another that holds the rest.
    auto& pool = process_staging_pool();
    const unsigned per_kit = config.bounce_buffers_per_thread();
    const std::size_t wanted = std::min<std::size_t>(r->tasks.size(), 2 * r->max_parallel);
    const std::uint64_t fit = std::max<std::uint64_t>(1, pool.kits_that_fit(config.bounce_buffer_size(), per_kit) / 2);
    const std::vector<unsigned> counts(std::min<std::uint64_t>((wanted + per_kit - 1) / per_kit, fit), per_kit);
    auto kits = pool.acquire({api, plan->buffer.device, config.bounce_buffer_size()}, counts, &r->pinned_wait_ns);
    if (!kits.ok()) return fail(kits.status());
    r->kits = std::move(*kits);
    for (const auto& kit : r->kits) {
      for (void* b : kit->buffers) {
        if (r->slots.size() < wanted) r->slots.push_back(b);
      }
    }
  }
  r->words = &words_for(*api);
  auto words = r->words->acquire();
  if (!words.ok()) {
    for (auto& k : r->kits) process_staging_pool().release(std::move(k));
    return fail(words.status());
  }
  std::tie(r->gpu, r->cpu) = *words;

  stream_pool().ensure_workers(r->max_parallel);
  auto outer = RequestState::deferred(r);
  r->future = outer;
  // Watched before anything is queued: the steps that meet the stream's waits must be able to run while
  // this thread still queues (docs/stream-order.md).
  r->watch();
  const auto device_base = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(buffer));
  Queued queued = queue_commands(*api, stream, *r, device_base);
  r->queueing_ended(queued.error.ok() ? Status() : label.error(queued.error), queued.gpu_final);
  if (queued.gpu_final == 0) {
    // Nothing was queued, so the watcher ends the request at once; it is waited for, so that its slots and
    // words are given back before the caller has its answer. A driver that refuses stream memory operations
    // here still gets its request, synchronized.
    Future(outer).wait();
    return synchronized_request(file, *api, label, buffer,
                                "the driver refused a stream memory operation: " + queued.error.message());
  }
  return Future(outer);
}

void release_stream_words_for_testing(const CudaApi& api) {
  AllWords& all = made_once(g_all_words, [] { return new AllWords; });
  std::lock_guard<std::mutex> lock(all.mutex);
  all.of.erase(&api);  // frees the pages
}

}  // namespace ferry::detail
