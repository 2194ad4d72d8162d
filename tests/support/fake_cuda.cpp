#include "support/fake_cuda.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "backends/staging_pool.hpp"
#include "ferry/config.hpp"
#include "file/stream_order.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry::testing {

using namespace ferry::detail;

namespace {

constexpr int kMaxDevices = 16;

enum class RangeKind { device, managed, pinned_alloc, registered };

struct Range {
  std::size_t size;
  RangeKind kind;
  int device;
  bool owned;  // allocated by the fake (freed on reset); registered ranges belong to the caller
};

// Work queued on a stream: copies and memsets (deferred mode, or behind a wait), waits on a 32-bit word
// (cuStreamWaitValue32) and writes of one (cuStreamWriteValue32). In FakeDeviceMode::on_synchronize nothing
// runs on its own: a stream makes progress when it, an event recorded on it, or the context is
// synchronised, as if the device only worked while someone watched. In FakeDeviceMode::autonomous a device
// thread runs it through the hardware queues.
enum class OpKind { copy, memset, wait_value, write_value };

struct PendingOp {
  std::uint64_t sequence;
  OpKind kind = OpKind::copy;
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  unsigned char value = 0;
  std::uint32_t word_value = 0;  // wait_value, write_value
  unsigned int wait_flags = 0;
  std::chrono::steady_clock::time_point ready_at{};  // autonomous with a copy latency: not run before this
};

struct FakeStream {
  std::deque<PendingOp> pending;
  std::uint64_t last_sequence = 0;
  CUcontext context = nullptr;
  std::size_t hardware_queue = 0;  // autonomous mode: the queue its work goes through
};

struct FakeEvent {
  CUstream stream = nullptr;
  std::uint64_t sequence = 0;
  bool recorded = false;
};

struct FakeContext {
  int device;
};

// One FIFO of the autonomous device: (stream, sequence) of each op in the order it was queued.
using HardwareQueue = std::deque<std::pair<CUstream, std::uint64_t>>;

struct State {
  // Every entry point holds this shared; in autonomous mode with implicit_sync_blocks_driver, the calls
  // that synchronise implicitly hold it exclusively while they wait for the device to be idle.
  std::shared_mutex driver_gate;
  std::mutex mutex;
  std::condition_variable progress;  // the autonomous device ran something, or was given work
  FakeCudaScript script;
  FakeCudaCounters counters;
  std::map<std::uintptr_t, Range> ranges;  // start address -> range
  std::uint64_t abandoned_pinned_bytes = 0;  // still pinned when a reset dropped them; never reset
  std::map<CUstream, std::unique_ptr<FakeStream>> streams;  // nullptr key: the default stream
  std::map<CUevent, std::unique_ptr<FakeEvent>> events;
  std::uint64_t next_sequence = 1;
  FakeContext contexts[kMaxDevices];
  std::set<std::pair<int, int>> peer_enabled;  // (device whose context was current, peer device)
  std::vector<HardwareQueue> hardware;  // autonomous mode
  std::size_t streams_made = 0;         // streams created since the reset: the next one's queue
  std::thread device;                   // autonomous mode: runs the queues
  bool device_stop = false;
};

State& state() {
  static State* s = [] {
    auto* created = new State;
    for (int i = 0; i < kMaxDevices; ++i) created->contexts[i].device = i;
    return created;
  }();
  return *s;
}

thread_local CUcontext current_context = nullptr;

// Every entry point starts here: counts the call and applies a scripted failure.
bool scripted_failure(State& s, const char* symbol, CUresult* out) {
  ++s.counters.calls;
  auto it = s.script.failures.find(symbol);
  if (it == s.script.failures.end() || it->second.remaining == 0) return false;
  if (it->second.remaining > 0) --it->second.remaining;
  *out = it->second.result;
  return true;
}

#define FAKE_ENTER_(symbol)                                \
  State& s = state();                                      \
  std::shared_lock<std::shared_mutex> gate(s.driver_gate); \
  std::unique_lock<std::mutex> lock(s.mutex);              \
  if (CUresult scripted; scripted_failure(s, symbol, &scripted)) return scripted

bool autonomous(const State& s) { return s.script.device_mode == FakeDeviceMode::autonomous; }

// Waits (the fake's lock released meanwhile) until `done()` holds; aborts after 60 s, naming `what`, so a
// stream that never drains fails the test instead of hanging it.
template <typename Done>
void wait_for_device(State& s, std::unique_lock<std::mutex>& lock, const char* what, Done done) {
  if (!s.progress.wait_for(lock, std::chrono::seconds(60), done)) {
    std::fprintf(stderr, "fake CUDA: %s waited 60 s for the device\n", what);
    std::abort();
  }
}

bool device_idle(const State& s) {
  for (const auto& [handle, stream] : s.streams) {
    if (!stream->pending.empty()) return false;
  }
  return true;
}

// A call that synchronises implicitly (a device or pinned allocation, a free, a stream's creation, a
// context synchronisation): in autonomous mode with implicit_sync_blocks_driver it waits until the device
// is idle while no other thread can enter the driver, the worst the CUDA documentation allows.
#define FAKE_ENTER_SYNCING_(symbol)                                                   \
  State& s = state();                                                                 \
  std::unique_lock<std::shared_mutex> gate(s.driver_gate, std::defer_lock);           \
  std::shared_lock<std::shared_mutex> shared_gate(s.driver_gate, std::defer_lock);    \
  if (s.script.implicit_sync_blocks_driver && autonomous(s)) gate.lock();             \
  else shared_gate.lock();                                                            \
  std::unique_lock<std::mutex> lock(s.mutex);                                         \
  if (CUresult scripted; scripted_failure(s, symbol, &scripted)) return scripted;     \
  if (gate.owns_lock()) wait_for_device(s, lock, symbol, [&] { return device_idle(s); })

int current_device() {
  if (current_context == nullptr) return -1;
  return reinterpret_cast<FakeContext*>(current_context)->device;
}

// The range holding [address, address + bytes), or nullptr.
const Range* find_range(State& s, std::uintptr_t address, std::size_t bytes, std::uintptr_t* start = nullptr) {
  auto it = s.ranges.upper_bound(address);
  if (it == s.ranges.begin()) return nullptr;
  --it;
  if (address + bytes > it->first + it->second.size) return nullptr;
  if (bytes == 0 && address >= it->first + it->second.size) return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

bool is_device_range(State& s, CUdeviceptr address, std::size_t bytes) {
  const Range* r = find_range(s, static_cast<std::uintptr_t>(address), bytes);
  return r != nullptr && (r->kind == RangeKind::device || r->kind == RangeKind::managed);
}

void* aligned_block(std::size_t bytes, std::size_t alignment) {
  std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}

void* add_range(State& s, std::size_t bytes, RangeKind kind, int device) {
  void* block = aligned_block(bytes, kind == RangeKind::pinned_alloc ? 4096 : 256);
  s.ranges[reinterpret_cast<std::uintptr_t>(block)] = Range{bytes == 0 ? 1 : bytes, kind, device, true};
  return block;
}

FakeStream& stream_of(State& s, CUstream stream) {
  auto& slot = s.streams[stream];  // the default stream is created on first use
  if (!slot) slot = std::make_unique<FakeStream>();
  return *slot;
}

bool wait_satisfied(const PendingOp& op) {
  auto now = reinterpret_cast<const std::atomic<std::uint32_t>*>(op.dst)->load(std::memory_order_acquire);
  if (op.wait_flags == CU_STREAM_WAIT_VALUE_EQ) return now == op.word_value;
  return static_cast<std::int32_t>(now - op.word_value) >= 0;  // GEQ
}

// Does `op` if it can run now (a wait whose value has not come cannot); true when it ran.
bool run_op(const PendingOp& op) {
  switch (op.kind) {
    case OpKind::copy: std::memcpy(op.dst, op.src, op.bytes); return true;
    case OpKind::memset: std::memset(op.dst, op.value, op.bytes); return true;
    case OpKind::wait_value: return wait_satisfied(op);
    case OpKind::write_value:
      reinterpret_cast<std::atomic<std::uint32_t>*>(op.dst)->store(op.word_value, std::memory_order_release);
      return true;
  }
  return false;
}

// on_synchronize mode: runs `handle`'s queued work up to `up_to` on the calling thread. Unmet waits are
// polled with the fake's lock released (another thread meets them); the stream is looked up again after.
void run_pending(State& s, std::unique_lock<std::mutex>& lock, CUstream handle, std::uint64_t up_to) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    auto it = s.streams.find(handle);
    if (it == s.streams.end()) return;
    FakeStream& stream = *it->second;
    if (stream.pending.empty() || stream.pending.front().sequence > up_to) return;
    if (run_op(stream.pending.front())) {
      stream.pending.pop_front();
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "fake CUDA: a stream waited 60 s for a value that never came\n");
      std::abort();
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    lock.lock();
  }
}

// autonomous mode: the device. Each hardware queue runs its ops in the order they were queued, whatever
// stream they belong to: an unmet wait at a queue's head holds up every stream behind it on that queue.
void device_loop(State& s) {
  std::unique_lock<std::mutex> lock(s.mutex);
  while (!s.device_stop) {
    bool ran = false;
    for (HardwareQueue& queue : s.hardware) {
      while (!queue.empty()) {
        auto [handle, sequence] = queue.front();
        FakeStream& stream = *s.streams.at(handle);
        const PendingOp& op = stream.pending.front();
        if (op.sequence != sequence) std::abort();  // a stream's order is its queue's order
        if (op.ready_at > std::chrono::steady_clock::now() || !run_op(op)) break;
        stream.pending.pop_front();
        queue.pop_front();
        ran = true;
      }
    }
    if (ran) {
      s.progress.notify_all();
      continue;
    }
    // A host word may change meanwhile; a copy waiting out its latency is looked at again soon.
    s.progress.wait_for(lock, s.script.copy_latency.count() > 0 ? std::chrono::microseconds(2)
                                                                : std::chrono::microseconds(50));
  }
}

// on_synchronize mode: runs `handle`'s work up to `up_to`; autonomous: waits until the device has.
void drain(State& s, std::unique_lock<std::mutex>& lock, CUstream handle, std::uint64_t up_to, const char* what) {
  if (!autonomous(s)) return run_pending(s, lock, handle, up_to);
  wait_for_device(s, lock, what, [&] {
    auto it = s.streams.find(handle);
    return it == s.streams.end() || it->second->pending.empty() || it->second->pending.front().sequence > up_to;
  });
}

// Queues `op` on `stream`; in immediate mode a copy or memset on an idle stream is done at once.
CUresult enqueue(State& s, CUstream stream, PendingOp op) {
  FakeStream& queue = stream_of(s, stream);
  bool eager = op.kind == OpKind::copy || op.kind == OpKind::memset;
  if (eager && !autonomous(s) && s.script.copy_mode == FakeCopyMode::immediate && queue.pending.empty()) {
    run_op(op);
    return CUDA_SUCCESS;
  }
  op.sequence = s.next_sequence++;
  if (op.kind == OpKind::copy && s.script.copy_latency.count() > 0) {
    op.ready_at = std::chrono::steady_clock::now() + s.script.copy_latency;
  }
  queue.pending.push_back(op);
  queue.last_sequence = op.sequence;
  if (autonomous(s)) {
    if (s.hardware.empty()) s.hardware.resize(static_cast<std::size_t>(std::max(1, s.script.hardware_queues)));
    s.hardware[queue.hardware_queue % s.hardware.size()].emplace_back(stream, op.sequence);
    if (!s.device.joinable()) s.device = std::thread([&s] { device_loop(s); });
    s.progress.notify_all();
  }
  return CUDA_SUCCESS;
}

CUresult copy_async(State& s, void* dst, const void* src, std::size_t bytes, CUstream stream) {
  PendingOp op;
  op.kind = OpKind::copy;
  op.dst = dst;
  op.src = src;
  op.bytes = bytes;
  return enqueue(s, stream, op);
}

CUresult need_context() { return current_context == nullptr ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS; }

// ---- entry points ----

CUresult fake_cuInit(unsigned int flags) {
  FAKE_ENTER_("cuInit");
  return flags == 0 ? s.script.init_result : CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_cuDriverGetVersion(int* version) {
  FAKE_ENTER_("cuDriverGetVersion");
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetCount(int* count) {
  FAKE_ENTER_("cuDeviceGetCount");
  *count = s.script.device_count;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGet(CUdevice* device, int ordinal) {
  FAKE_ENTER_("cuDeviceGet");
  if (ordinal < 0 || ordinal >= s.script.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetName(char* name, int length, CUdevice device) {
  FAKE_ENTER_("cuDeviceGetName");
  if (device < 0 || device >= s.script.device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::string text = "Fake GPU " + std::to_string(device);
  std::snprintf(name, static_cast<std::size_t>(length), "%s", text.c_str());
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  FAKE_ENTER_("cuDeviceGetAttribute");
  if (device < 0 || device >= s.script.device_count) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = 0x10 + device; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;  // as an older driver answers for attributes it lacks
  }
}

CUresult fake_cuDeviceGetPCIBusId(char* bus_id, int length, CUdevice device) {
  FAKE_ENTER_("cuDeviceGetPCIBusId");
  if (device < 0 || device >= s.script.device_count) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(bus_id, static_cast<std::size_t>(length), "0000:%02x:00.0", 0x10 + device);
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice device) {
  FAKE_ENTER_("cuDeviceTotalMem_v2");
  if (device < 0 || device >= s.script.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = static_cast<std::size_t>(s.script.device_total_memory_bytes);
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  FAKE_ENTER_("cuDevicePrimaryCtxRetain");
  if (device < 0 || device >= s.script.device_count) return CUDA_ERROR_INVALID_DEVICE;
  ++s.counters.context_retains;
  *context = reinterpret_cast<CUcontext>(&s.contexts[device]);
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  FAKE_ENTER_("cuDevicePrimaryCtxRelease_v2");
  if (device < 0 || device >= s.script.device_count) return CUDA_ERROR_INVALID_DEVICE;
  ++s.counters.context_releases;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSetCurrent(CUcontext context) {
  FAKE_ENTER_("cuCtxSetCurrent");
  ++s.counters.set_current_calls;
  current_context = context;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetCurrent(CUcontext* context) {
  FAKE_ENTER_("cuCtxGetCurrent");
  *context = current_context;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSynchronize() {
  FAKE_ENTER_SYNCING_("cuCtxSynchronize");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  ++s.counters.context_syncs;
  if (autonomous(s)) {
    wait_for_device(s, lock, "cuCtxSynchronize", [&] { return device_idle(s); });
    return CUDA_SUCCESS;
  }
  std::vector<CUstream> handles;
  for (auto& [handle, stream] : s.streams) handles.push_back(handle);
  for (CUstream handle : handles) run_pending(s, lock, handle, UINT64_MAX);
  return CUDA_SUCCESS;
}

// Writes one attribute for `address`; unknown memory gets the zero values cuPointerGetAttributes gives.
void write_attribute(State& s, CUpointer_attribute attribute, void* data, std::uintptr_t address) {
  std::uintptr_t start = 0;
  const Range* r = find_range(s, address, 0, &start);
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: {
      unsigned int type = 0;
      if (r) type = (r->kind == RangeKind::device || r->kind == RangeKind::managed) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      *static_cast<unsigned int*>(data) = type;
      break;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = r ? (r->device < 0 ? 0 : r->device) : -2;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned int*>(data) = (r && r->kind == RangeKind::managed) ? 1u : 0u;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = r ? start : 0;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<std::size_t*>(data) = r ? r->size : 0;
      break;
    default:
      break;
  }
}

CUresult fake_cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  FAKE_ENTER_("cuPointerGetAttribute");
  ++s.counters.pointer_queries;
  if (find_range(s, static_cast<std::uintptr_t>(pointer), 0) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  write_attribute(s, attribute, data, static_cast<std::uintptr_t>(pointer));
  return CUDA_SUCCESS;
}

CUresult fake_cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes, void** data,
                                     CUdeviceptr pointer) {
  FAKE_ENTER_("cuPointerGetAttributes");
  ++s.counters.pointer_queries;
  for (unsigned int i = 0; i < count; ++i) write_attribute(s, attributes[i], data[i], static_cast<std::uintptr_t>(pointer));
  return CUDA_SUCCESS;
}

CUresult fake_cuMemAlloc_v2(CUdeviceptr* pointer, std::size_t bytes) {
  FAKE_ENTER_SYNCING_("cuMemAlloc_v2");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  ++s.counters.device_allocs;
  *pointer = reinterpret_cast<std::uintptr_t>(add_range(s, bytes, RangeKind::device, current_device()));
  return CUDA_SUCCESS;
}

CUresult fake_cuMemFree_v2(CUdeviceptr pointer) {
  FAKE_ENTER_SYNCING_("cuMemFree_v2");
  auto it = s.ranges.find(static_cast<std::uintptr_t>(pointer));
  if (it == s.ranges.end() || it->second.kind != RangeKind::device) return CUDA_ERROR_INVALID_VALUE;
  ++s.counters.device_frees;
  std::free(reinterpret_cast<void*>(it->first));
  s.ranges.erase(it);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemHostAlloc(void** pointer, std::size_t bytes, unsigned int /*flags*/) {
  std::this_thread::sleep_for(state().script.pinned_alloc_delay);  // outside the fake's lock: others go on
  FAKE_ENTER_SYNCING_("cuMemHostAlloc");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  ++s.counters.pinned_allocs;
  *pointer = add_range(s, bytes, RangeKind::pinned_alloc, current_device());
  return CUDA_SUCCESS;
}

CUresult fake_cuMemFreeHost(void* pointer) {
  FAKE_ENTER_("cuMemFreeHost");
  auto it = s.ranges.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == s.ranges.end() || it->second.kind != RangeKind::pinned_alloc) return CUDA_ERROR_INVALID_VALUE;
  ++s.counters.pinned_frees;
  std::free(pointer);
  s.ranges.erase(it);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemHostRegister_v2(void* pointer, std::size_t bytes, unsigned int /*flags*/) {
  std::this_thread::sleep_for(state().script.pinned_alloc_delay);
  FAKE_ENTER_SYNCING_("cuMemHostRegister_v2");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto address = reinterpret_cast<std::uintptr_t>(pointer);
  // Any overlap with a known range is refused, as the driver refuses overlapping registrations.
  auto next = s.ranges.lower_bound(address);
  if (next != s.ranges.end() && next->first < address + bytes) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (find_range(s, address, 0) != nullptr) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  ++s.counters.host_registers;
  s.ranges[address] = Range{bytes, RangeKind::registered, current_device(), false};
  return CUDA_SUCCESS;
}

CUresult fake_cuMemHostUnregister(void* pointer) {
  FAKE_ENTER_("cuMemHostUnregister");
  auto it = s.ranges.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == s.ranges.end() || it->second.kind != RangeKind::registered) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  ++s.counters.host_unregisters;
  s.ranges.erase(it);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, std::size_t bytes) {
  FAKE_ENTER_("cuMemcpyHtoD_v2");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (!is_device_range(s, dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
  ++s.counters.htod_copies;
  s.counters.htod_bytes += bytes;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, std::size_t bytes) {
  FAKE_ENTER_("cuMemcpyDtoH_v2");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (!is_device_range(s, src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  ++s.counters.dtoh_copies;
  s.counters.dtoh_bytes += bytes;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

CUresult fake_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream) {
  FAKE_ENTER_("cuMemcpyHtoDAsync_v2");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (!is_device_range(s, dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (stream != nullptr && s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.htod_async_copies;
  s.counters.htod_bytes += bytes;
  return copy_async(s, reinterpret_cast<void*>(dst), src, bytes, stream);
}

// As the driver documents it: one set of attributes at least, the first applying from copy 0, each with a
// source access order; a stream, never the legacy one. Every destination is checked before any is queued.
CUresult fake_cuMemcpyBatchAsync_v2(CUdeviceptr* dsts, CUdeviceptr* srcs, std::size_t* sizes, std::size_t count,
                                    CUmemcpyAttributes* attrs, std::size_t* attrs_indices, std::size_t attrs_count,
                                    CUstream stream) {
  FAKE_ENTER_("cuMemcpyBatchAsync_v2");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (count == 0 || attrs_count == 0 || attrs_count > count || attrs_indices[0] != 0) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t k = 0; k < attrs_count; ++k) {
    if (attrs[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) return CUDA_ERROR_INVALID_VALUE;
    if (k > 0 && attrs_indices[k] <= attrs_indices[k - 1]) return CUDA_ERROR_INVALID_VALUE;
  }
  if (stream == nullptr || s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < count; ++i) {
    if (!is_device_range(s, dsts[i], sizes[i])) return CUDA_ERROR_INVALID_VALUE;
  }
  ++s.counters.batched_copy_calls;
  for (std::size_t i = 0; i < count; ++i) {
    ++s.counters.batched_copies;
    s.counters.htod_bytes += sizes[i];
    CUresult r = copy_async(s, reinterpret_cast<void*>(dsts[i]), reinterpret_cast<const void*>(srcs[i]), sizes[i], stream);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult fake_cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  FAKE_ENTER_("cuMemcpyDtoHAsync_v2");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (!is_device_range(s, src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (stream != nullptr && s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.dtoh_async_copies;
  s.counters.dtoh_bytes += bytes;
  return copy_async(s, dst, reinterpret_cast<const void*>(src), bytes, stream);
}

CUresult fake_cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, std::size_t count) {
  FAKE_ENTER_("cuMemsetD8_v2");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (!is_device_range(s, dst, count)) return CUDA_ERROR_INVALID_VALUE;
  ++s.counters.memsets;
  std::memset(reinterpret_cast<void*>(dst), value, count);
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamCreate(CUstream* stream, unsigned int /*flags*/) {
  FAKE_ENTER_SYNCING_("cuStreamCreate");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  auto created = std::make_unique<FakeStream>();
  created->context = current_context;
  created->hardware_queue = ++s.streams_made;  // round robin; the legacy stream has queue 0
  *stream = reinterpret_cast<CUstream>(created.get());
  s.streams[*stream] = std::move(created);
  ++s.counters.streams_created;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamDestroy_v2(CUstream stream) {
  FAKE_ENTER_("cuStreamDestroy_v2");
  auto it = s.streams.find(stream);
  if (stream == nullptr || it == s.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  drain(s, lock, stream, UINT64_MAX, "cuStreamDestroy");  // work already queued still completes
  it = s.streams.find(stream);
  if (it != s.streams.end()) s.streams.erase(it);
  ++s.counters.streams_destroyed;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamSynchronize(CUstream stream) {
  FAKE_ENTER_("cuStreamSynchronize");
  if (stream != nullptr && s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.stream_syncs;
  stream_of(s, stream);
  drain(s, lock, stream, UINT64_MAX, "cuStreamSynchronize");
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamQuery(CUstream stream) {
  FAKE_ENTER_("cuStreamQuery");
  if (stream != nullptr && s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.stream_queries;
  if (stream_of(s, stream).pending.empty()) {
    ++s.counters.idle_stream_queries;
    return CUDA_SUCCESS;
  }
  if (!autonomous(s)) run_pending(s, lock, stream, UINT64_MAX);  // done by the next query, as cuEventQuery
  return CUDA_ERROR_NOT_READY;
}

CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream) {
  FAKE_ENTER_("cuMemsetD8Async");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (!is_device_range(s, dst, count)) return CUDA_ERROR_INVALID_VALUE;
  if (stream != nullptr && s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.memsets;
  PendingOp op;
  op.kind = OpKind::memset;
  op.dst = reinterpret_cast<void*>(dst);
  op.bytes = count;
  op.value = value;
  return enqueue(s, stream, op);
}

// The word of a stream memory operation must be memory the device can see: device memory or mapped
// pinned host memory.
CUresult queue_word_op(State& s, CUstream stream, OpKind kind, CUdeviceptr address, unsigned int value,
                       unsigned int flags) {
  if (stream == nullptr && current_context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (stream != nullptr && s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (find_range(s, static_cast<std::uintptr_t>(address), sizeof(std::uint32_t)) == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  PendingOp op;
  op.kind = kind;
  op.dst = reinterpret_cast<void*>(address);
  op.word_value = value;
  op.wait_flags = flags;
  return enqueue(s, stream, op);
}

CUresult fake_cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr address, unsigned int value, unsigned int flags) {
  FAKE_ENTER_("cuStreamWaitValue32_v2");
  ++s.counters.stream_waits;
  return queue_word_op(s, stream, OpKind::wait_value, address, value, flags);
}

CUresult fake_cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr address, unsigned int value, unsigned int flags) {
  FAKE_ENTER_("cuStreamWriteValue32_v2");
  ++s.counters.stream_writes;
  return queue_word_op(s, stream, OpKind::write_value, address, value, flags);
}

CUresult fake_cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  FAKE_ENTER_("cuStreamIsCapturing");
  if (stream != nullptr && s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  *status = s.script.capturing.count(stream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult fake_cuStreamGetCtx(CUstream stream, CUcontext* context) {
  FAKE_ENTER_("cuStreamGetCtx");
  if (stream == nullptr) {
    if (current_context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    *context = current_context;
    return CUDA_SUCCESS;
  }
  auto it = s.streams.find(stream);
  if (it == s.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  *context = it->second->context;
  return CUDA_SUCCESS;
}

CUresult fake_cuMemHostGetDevicePointer_v2(CUdeviceptr* device_pointer, void* host_pointer, unsigned int flags) {
  FAKE_ENTER_("cuMemHostGetDevicePointer_v2");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  const Range* r = find_range(s, reinterpret_cast<std::uintptr_t>(host_pointer), 1);
  if (flags != 0 || r == nullptr || (r->kind != RangeKind::pinned_alloc && r->kind != RangeKind::registered)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *device_pointer = reinterpret_cast<CUdeviceptr>(host_pointer);  // unified addressing
  return CUDA_SUCCESS;
}

CUresult fake_cuEventCreate(CUevent* event, unsigned int /*flags*/) {
  FAKE_ENTER_("cuEventCreate");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  auto created = std::make_unique<FakeEvent>();
  *event = reinterpret_cast<CUevent>(created.get());
  s.events[*event] = std::move(created);
  ++s.counters.events_created;
  return CUDA_SUCCESS;
}

CUresult fake_cuEventRecord(CUevent event, CUstream stream) {
  FAKE_ENTER_("cuEventRecord");
  auto it = s.events.find(event);
  if (it == s.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (stream != nullptr && s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.events_recorded;
  it->second->stream = stream;
  it->second->sequence = stream_of(s, stream).last_sequence;
  it->second->recorded = true;
  return CUDA_SUCCESS;
}

CUresult fake_cuEventSynchronize(CUevent event) {
  FAKE_ENTER_("cuEventSynchronize");
  auto it = s.events.find(event);
  if (it == s.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.event_syncs;
  if (it->second->recorded) drain(s, lock, it->second->stream, it->second->sequence, "cuEventSynchronize");
  return CUDA_SUCCESS;
}

CUresult fake_cuEventQuery(CUevent event) {
  FAKE_ENTER_("cuEventQuery");
  auto it = s.events.find(event);
  if (it == s.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.event_queries;
  auto stream = s.streams.find(it->second->stream);
  if (!it->second->recorded || stream == s.streams.end()) return CUDA_SUCCESS;
  FakeStream& queue = *stream->second;
  bool busy = !queue.pending.empty() && queue.pending.front().sequence <= it->second->sequence;
  if (!busy) return CUDA_SUCCESS;
  if (!autonomous(s)) run_pending(s, lock, it->second->stream, it->second->sequence);  // done by the next query
  return CUDA_ERROR_NOT_READY;
}

CUresult fake_cuEventDestroy_v2(CUevent event) {
  FAKE_ENTER_("cuEventDestroy_v2");
  if (s.events.erase(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.events_destroyed;
  return CUDA_SUCCESS;
}

// Peer copies need each side to be device memory of the device its context belongs to.
bool on_device_of(State& s, CUdeviceptr address, std::size_t bytes, CUcontext context) {
  if (context == nullptr) return false;
  const Range* r = find_range(s, static_cast<std::uintptr_t>(address), bytes);
  return r != nullptr && r->kind == RangeKind::device && r->device == reinterpret_cast<FakeContext*>(context)->device;
}

CUresult fake_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src, CUcontext src_context,
                                std::size_t bytes, CUstream stream) {
  FAKE_ENTER_("cuMemcpyPeerAsync");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (!on_device_of(s, dst, bytes, dst_context) || !on_device_of(s, src, bytes, src_context)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (stream != nullptr && s.streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  ++s.counters.peer_copies;
  s.counters.peer_bytes += bytes;
  return copy_async(s, reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, stream);
}

CUresult fake_cuDeviceCanAccessPeer(int* can_access, CUdevice device, CUdevice peer) {
  FAKE_ENTER_("cuDeviceCanAccessPeer");
  if (device < 0 || device >= s.script.device_count || peer < 0 || peer >= s.script.device_count) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *can_access = (device != peer && s.script.peer_access) ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxEnablePeerAccess(CUcontext peer_context, unsigned int flags) {
  FAKE_ENTER_("cuCtxEnablePeerAccess");
  if (CUresult r = need_context(); r != CUDA_SUCCESS) return r;
  if (flags != 0 || peer_context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int self = current_device();
  int peer = reinterpret_cast<FakeContext*>(peer_context)->device;
  if (self == peer || !s.script.peer_access) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  if (!s.peer_enabled.insert({self, peer}).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  ++s.counters.peer_access_enabled;
  return CUDA_SUCCESS;
}

struct ErrorWords {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorWords kErrorWords[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorWords* words_for(CUresult code) {
  for (const ErrorWords& w : kErrorWords) {
    if (w.code == code) return &w;
  }
  return nullptr;
}

// Like the real driver, these two answer without initialisation and take no lock-worthy state.
CUresult fake_cuGetErrorName(CUresult error, const char** name) {
  const ErrorWords* w = words_for(error);
  *name = w ? w->name : nullptr;
  return w ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_cuGetErrorString(CUresult error, const char** text) {
  const ErrorWords* w = words_for(error);
  *text = w ? w->text : nullptr;
  return w ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#undef FAKE_ENTER_

CudaApi make_table() {
  CudaApi api;
  // Every entry point of cuda_symbols.hpp, required or optional, is the fake_ function of its name.
#define FAKE_ENTRY_(need, symbol, result, parameters) api.symbol = fake_##symbol;
  FERRY_CUDA_DRIVER_SYMBOLS(FAKE_ENTRY_)
#undef FAKE_ENTRY_
  api.library = "fake-cuda";
  return api;
}

}  // namespace

const CudaApi& fake_cuda_api() {
  static const CudaApi table = make_table();
  return table;
}

namespace {

struct LivePinned {
  std::size_t ranges = 0;
  std::uint64_t bytes = 0;
};

// Pinned allocations and registered ranges of `s` (its lock held).
LivePinned live_pinned(const State& s) {
  LivePinned live;
  for (const auto& [start, range] : s.ranges) {
    if (range.kind != RangeKind::pinned_alloc && range.kind != RangeKind::registered) continue;
    live.ranges += 1;
    live.bytes += range.size;
  }
  return live;
}

}  // namespace

void reset_fake_cuda() {
  // A worker of the engine gives its staging back once it finds nothing more to do, which may be a moment
  // after the request it last served was seen done: the fake driver is reset under no kit still in use.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (ferry::pinned_memory_use().pinned_bytes != 0 && std::chrono::steady_clock::now() < deadline) {
    detail::process_staging_pool().clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  release_primary_contexts_for_testing(fake_cuda_api());
  release_stream_words_for_testing(fake_cuda_api());  // pinned words the reset below frees
  State& s = state();
  std::thread device;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.device_stop = true;
    device.swap(s.device);
  }
  s.progress.notify_all();
  if (device.joinable()) device.join();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.device_stop = false;
  s.hardware.clear();
  s.streams_made = 0;
  s.abandoned_pinned_bytes += live_pinned(s).bytes;
  for (auto& [start, range] : s.ranges) {
    if (range.owned) std::free(reinterpret_cast<void*>(start));
  }
  s.ranges.clear();
  s.streams.clear();
  s.events.clear();
  s.next_sequence = 1;
  s.peer_enabled.clear();
  s.script = FakeCudaScript{};
  s.counters = FakeCudaCounters{};
  current_context = nullptr;  // this thread's; worker threads set theirs through make_current
}

FakeCudaScript& fake_cuda_script() { return state().script; }

FakeCudaCounters fake_cuda_counters() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.counters;
}

std::size_t fake_cuda_live_pinned() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return live_pinned(s).ranges;
}

std::uint64_t fake_cuda_pinned_bytes_not_freed() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return live_pinned(s).bytes + s.abandoned_pinned_bytes;
}

std::size_t fake_cuda_live_device() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::size_t n = 0;
  for (const auto& [start, range] : s.ranges) {
    if (range.kind == RangeKind::device) ++n;
  }
  return n;
}

std::size_t fake_cuda_pending_copies() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::size_t n = 0;
  for (const auto& [handle, stream] : s.streams) n += stream->pending.size();
  return n;
}

void* fake_cuda_alloc_managed(std::size_t bytes, int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return add_range(s, bytes, RangeKind::managed, device);
}

void* fake_cuda_alloc_device(std::size_t bytes, int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return add_range(s, bytes, RangeKind::device, device);
}

void fake_cuda_free(void* ptr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.ranges.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == s.ranges.end() || !it->second.owned) return;
  std::free(ptr);
  s.ranges.erase(it);
}

}  // namespace ferry::testing
