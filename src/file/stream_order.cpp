// Stream-ordered requests: a host function begins the request, a wait on a pinned word ends the stream's
// part in it. See stream_order.hpp for the design.
#include "file/stream_order.hpp"

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "file/file_state.hpp"
#include "io/request.hpp"
#include "io/thread_pool.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/gpu_platform.hpp"

namespace ferry::detail {

/// The request behind a Future (a stream-ordered request wraps the one its host function starts).
struct FutureAccess {
  static std::shared_ptr<RequestState> state(const Future& f) { return f.state_; }
};
namespace {

// Words of pinned, device-mapped host memory that streams wait on. A word is reused once the request
// that used it has ended: each use waits for a value one higher than the last (GEQ compares as a signed
// difference, so the count may wrap), and a stream still waiting on an older value is released by a
// newer one as well.
class StreamFlags {
 public:
  struct Word {
    std::atomic<std::uint32_t>* host = nullptr;
    CUdeviceptr device = 0;
    std::uint32_t value = 0;
    std::size_t index = 0;
  };

  explicit StreamFlags(const CudaApi& api) : api_(api) {}

  // Needs a current context (the pages are portable: usable from every context).
  Result<Word> acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) FERRY_RETURN_IF_ERROR(add_page());
    std::size_t index = free_.back();
    free_.pop_back();
    Word w;
    w.index = index;
    w.value = ++values_[index];
    const Page& page = pages_[index / kWordsPerPage];
    w.host = page.host + index % kWordsPerPage;
    w.device = page.device + (index % kWordsPerPage) * sizeof(std::uint32_t);
    return w;
  }

  // Releases streams waiting on the word and returns it to the pool.
  void release(const Word& w) {
    w.host->store(w.value, std::memory_order_release);
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(w.index);
  }

  // The word untouched (its wait was never queued).
  void give_back(const Word& w) { release(w); }

  void free_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Page& p : pages_) (void)api_.cuMemFreeHost(p.host);
    pages_.clear();
    values_.clear();
    free_.clear();
  }

 private:
  static constexpr std::size_t kPageBytes = 4096;
  static constexpr std::size_t kWordsPerPage = kPageBytes / sizeof(std::uint32_t);
  struct Page {
    std::atomic<std::uint32_t>* host;
    CUdeviceptr device;
  };

  Status add_page() {
    void* host = nullptr;
    FERRY_RETURN_IF_ERROR(cuda_check(api_, api_.cuMemHostAlloc(&host, kPageBytes, kMemHostAllocPortable | kMemHostAllocDeviceMap),
                                     "cuMemHostAlloc of the words streams wait on"));
    CUdeviceptr device = reinterpret_cast<CUdeviceptr>(host);  // unified addressing: the same address
    if (api_.cuMemHostGetDevicePointer_v2 != nullptr) {
      Status mapped = cuda_check(api_, api_.cuMemHostGetDevicePointer_v2(&device, host, 0), "cuMemHostGetDevicePointer");
      if (!mapped.ok()) {
        (void)api_.cuMemFreeHost(host);
        return mapped;
      }
    }
    auto* words = static_cast<std::atomic<std::uint32_t>*>(host);
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
    for (std::size_t i = 0; i < kWordsPerPage; ++i) new (&words[i]) std::atomic<std::uint32_t>(0);
    std::size_t first = pages_.size() * kWordsPerPage;
    pages_.push_back(Page{words, device});
    values_.resize(values_.size() + kWordsPerPage, 0);
    for (std::size_t i = kWordsPerPage; i > 0; --i) free_.push_back(first + i - 1);
    return Status();
  }

  const CudaApi& api_;
  std::mutex mutex_;
  std::vector<Page> pages_;
  std::vector<std::uint32_t> values_;  // the last value handed out, per word
  std::vector<std::size_t> free_;
};

std::mutex& flags_mutex() {
  static std::mutex m;
  return m;
}
// Never destroyed: a request may end on a worker while statics are torn down at exit.
std::map<const CudaApi*, std::unique_ptr<StreamFlags>>& all_flags() {
  static auto* m = new std::map<const CudaApi*, std::unique_ptr<StreamFlags>>;
  return *m;
}

StreamFlags& flags_for(const CudaApi& api) {
  std::lock_guard<std::mutex> lock(flags_mutex());
  auto& slot = all_flags()[&api];
  if (!slot) slot = std::make_unique<StreamFlags>(api);
  return *slot;
}

// One stream-ordered request: what the host function needs to begin it and what its end must release.
struct Gate {
  std::shared_ptr<FileState> file;
  Direction direction = Direction::read;
  void* buffer = nullptr;
  std::uint64_t size = 0, offset = 0;
  std::shared_ptr<RequestState> outer;
  StreamFlags* flags = nullptr;      // the word end() writes (a cuStreamWaitValue32 may wait on it)
  StreamFlags::Word word;
  Status ordering_error;             // the stream could not be made to wait: reported in the future

  // The fallback's blocking host function waits on this.
  std::mutex mutex;
  std::condition_variable ended_cv;
  bool ended = false;

  void end(Result<Transfer> result) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (result.ok() && !ordering_error.ok()) result = ordering_error;
    }
    outer->complete_deferred(std::move(result));  // the future is done before the stream goes on
    if (flags != nullptr) flags->release(word);
    {
      std::lock_guard<std::mutex> lock(mutex);
      ended = true;
    }
    ended_cv.notify_all();
  }
};

// Run by the driver once the stream reaches the request: no CUDA calls here, only a job for the pool.
void begin_on_pool(void* user_data) {
  auto* held = static_cast<std::shared_ptr<Gate>*>(user_data);
  std::shared_ptr<Gate> gate = std::move(*held);
  delete held;
  shared_pool().submit([gate] {
    if (!gate->outer->try_begin()) {  // cancelled: its future ended then; release the stream
      gate->end(Status(ErrorCode::cancelled, "the request was cancelled before its stream reached it"));
      return;
    }
    // The request's own future: its completion ends the gate (on a worker, or here if it failed at once).
    auto inner = gate->file->submit(gate->direction, gate->buffer, gate->size, gate->offset);
    if (auto state = FutureAccess::state(inner)) gate->outer->link(state);  // bytes_done() and cancel()
    inner.then([gate](const Result<Transfer>& r) { gate->end(r); });
  });
}

// The fallback wait: holds the stream (and the driver's host-function thread) until the request ended.
void wait_for_end(void* user_data) {
  auto* held = static_cast<std::shared_ptr<Gate>*>(user_data);
  std::shared_ptr<Gate> gate = std::move(*held);
  delete held;
  std::unique_lock<std::mutex> lock(gate->mutex);
  gate->ended_cv.wait(lock, [&] { return gate->ended; });
}

// Makes the stream's context current for a scope on the caller's thread, restoring what was there.
class StreamContext {
 public:
  StreamContext(const CudaApi& api, CUstream stream) : api_(api) {
    CUcontext ctx = nullptr;
    CUresult got = api.cuStreamGetCtx(stream, &ctx);
    const auto handle = reinterpret_cast<std::uintptr_t>(stream);
    if (got == CUDA_ERROR_INVALID_CONTEXT && handle <= 2) {
      // The special handles (0 and 1: the legacy default stream, 2: the per-thread one) mean "of the
      // context current on this thread", and there is none.
      status_ = Status(ErrorCode::invalid_argument,
                       fmt::format("stream {} is a default stream, which belongs to the CUDA context current on "
                                   "the calling thread, and none is current: make one current (cudaSetDevice, "
                                   "cuCtxSetCurrent) or pass a stream you created",
                                   handle));
      return;
    }
    status_ = cuda_check(api, got, "cuStreamGetCtx (the stream given to a stream-ordered request)");
    if (!status_.ok()) return;
    status_ = cuda_check(api, api.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
    if (!status_.ok() || previous_ == ctx) return;
    status_ = cuda_check(api, api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    restore_ = status_.ok();
  }
  ~StreamContext() {
    if (restore_) (void)api_.cuCtxSetCurrent(previous_);
  }
  const Status& status() const { return status_; }

 private:
  const CudaApi& api_;
  CUcontext previous_ = nullptr;
  bool restore_ = false;
  Status status_;
};

}  // namespace

Future submit_on_stream(FileState& file, Direction direction, void* buffer, std::uint64_t size, std::uint64_t offset,
                        void* stream_handle) {
  const bool reading = is_read(direction);
  const char* verb = reading ? "read" : "write";
  auto fail = [&](const Status& why) {
    return Future(RequestState::failed(Status(
        why.code() == ErrorCode::ok ? ErrorCode::internal : why.code(),
        fmt::format("Could not queue a stream-ordered {} of {} bytes at offset {} {} \"{}\": {}", verb, size, offset,
                    reading ? "from" : "to", file.path, why.message()),
        why.sys_errno(), file.path)));
  };
  const GpuPlatform& gpu = file.gpu ? *file.gpu : process_gpu_platform();
  Status why;
  const CudaApi* api = gpu.cuda(&why);
  if (api == nullptr) return fail(why);
  if (Status s = api->stream_ordering_status(); !s.ok()) return fail(s);
  auto stream = static_cast<CUstream>(stream_handle);
  StreamContext context(*api, stream);
  if (!context.status().ok()) return fail(context.status());

  auto gate = std::make_shared<Gate>();
  gate->file = file.shared_from_this();
  gate->direction = direction;
  gate->buffer = buffer;
  gate->size = size;
  gate->offset = offset;
  gate->outer = RequestState::deferred();
  StreamFlags* flags = nullptr;
  if (api->cuStreamWaitValue32_v2 != nullptr) {
    flags = &flags_for(*api);
    auto word = flags->acquire();
    if (word.ok()) {
      gate->word = *word;
    } else {
      flags = nullptr;  // no pinned word: the fallback host function waits instead
    }
  }
  // Set before the host function is queued: the driver may run it, and the request may end, before
  // this thread goes on. end() then writes the word whether or not a wait on it gets queued.
  gate->flags = flags;
  shared_pool().ensure_workers(1);
  auto* begin_hold = new std::shared_ptr<Gate>(gate);
  CUresult queued = api->cuLaunchHostFunc(stream, &begin_on_pool, begin_hold);
  if (queued != CUDA_SUCCESS) {
    delete begin_hold;
    if (flags != nullptr) flags->give_back(gate->word);
    return fail(cuda_check(*api, queued, "cuLaunchHostFunc"));
  }
  // From here the request will run: every failure below goes into its future, never stops it.
  bool waits = flags != nullptr &&
               api->cuStreamWaitValue32_v2(stream, gate->word.device, gate->word.value, CU_STREAM_WAIT_VALUE_GEQ) ==
                   CUDA_SUCCESS;
  if (!waits) {
    // No wait on the word (its end() still writes and frees it): a host function that blocks until the
    // request ended holds the stream instead.
    auto* wait_hold = new std::shared_ptr<Gate>(gate);
    CUresult waited = api->cuLaunchHostFunc(stream, &wait_for_end, wait_hold);
    if (waited != CUDA_SUCCESS) {
      delete wait_hold;
      std::lock_guard<std::mutex> lock(gate->mutex);  // (a request that already ended needed no wait)
      gate->ordering_error = Status(
          ErrorCode::unavailable,
          fmt::format("the {} ran, but work queued on the stream after it was not made to wait for it: {}", verb,
                      cuda_check(*api, waited, "cuLaunchHostFunc").message()));
    }
  }
  return Future(gate->outer);
}

void release_stream_flags_for_testing(const CudaApi& api) {
  std::lock_guard<std::mutex> lock(flags_mutex());
  auto it = all_flags().find(&api);
  if (it == all_flags().end()) return;
  it->second->free_all();
  all_flags().erase(it);
}

}  // namespace ferry::detail
