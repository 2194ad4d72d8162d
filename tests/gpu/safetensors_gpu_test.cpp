// ferry::safetensors on real GPUs: checkpoints written by hand loaded into device memory byte for byte (and
// saved back from it, in the foreground and the background),
// caller regions untouched outside the tensors, and with two GPUs the device map and replicas. Skips, with
// the driver's own reason, where CUDA is unusable (and the two-GPU cases where there is one GPU).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "ferry/safetensors.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/safetensors_writer.hpp"
#include "support/test_files.hpp"

namespace ferry::safetensors {
namespace {

using ferry::detail::CudaApi;
using ferry::detail::CUdeviceptr;
using testing::SafetensorsBuilder;

const CudaApi* cuda_or_skip_reason(std::string* why, int* devices) {
  const CudaApi* api = ferry::detail::process_cuda_api();
  if (api == nullptr) {
    *why = ferry::detail::process_cuda_status().to_string();
    return nullptr;
  }
  if (api->cuDeviceGetCount(devices) != ferry::detail::CUDA_SUCCESS) *devices = 0;
  return api;
}

#define REQUIRE_GPUS(n)                                                                          \
  std::string skip_reason;                                                                       \
  int device_count = 0;                                                                          \
  const CudaApi* api = cuda_or_skip_reason(&skip_reason, &device_count);                         \
  if (api == nullptr) GTEST_SKIP() << "no usable GPU: " << skip_reason;                         \
  if (device_count < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs, the driver reports " << device_count

std::vector<std::uint8_t> to_host(const CudaApi& api, int device, const void* p, std::uint64_t n) {
  std::vector<std::uint8_t> out(n);
  ferry::detail::ScopedDeviceContext context(api, device);
  EXPECT_TRUE(context.status().ok()) << context.status().to_string();
  if (n) {
    EXPECT_EQ(api.cuMemcpyDtoH_v2(out.data(), static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)), n),
              ferry::detail::CUDA_SUCCESS);
  }
  return out;
}

SafetensorsBuilder every_dtype(std::uint64_t rows) {
  SafetensorsBuilder b;
  b.metadata("format", "pt");
  const char* dtypes[] = {"BOOL", "U8", "U16", "U32", "U64", "I8", "I16", "I32",
                          "I64", "F8_E4M3", "F8_E5M2", "F16", "BF16", "F32", "F64"};
  for (const char* d : dtypes) {
    b.add({std::string(d) + ".matrix", d, {rows, 33}});
    b.add({std::string(d) + ".scalar", d, {}});
    b.add({std::string(d) + ".empty", d, {0, 5}});
  }
  return b;
}

void expect_loaded(const CudaApi& api, const SafetensorsBuilder& b, const std::vector<LoadedTensor>& got, int device) {
  ASSERT_EQ(got.size(), b.specs().size());
  for (std::size_t i = 0; i < b.specs().size(); ++i) {
    const auto& spec = b.specs()[i];
    auto it = std::find_if(got.begin(), got.end(), [&](const LoadedTensor& t) { return t.name == spec.name; });
    ASSERT_NE(it, got.end()) << spec.name;
    EXPECT_EQ(it->device, device) << spec.name;
    EXPECT_EQ(it->shape, spec.shape) << spec.name;
    EXPECT_EQ(to_host(api, device, it->data, it->size_bytes), b.tensor_bytes(i)) << spec.name;
    // Where cudaMalloc would put it: GPU kernels choose their code by their operands' alignment.
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(it->data) % kDeviceTensorAlignment, 0u) << spec.name;
  }
}

TEST(SafetensorsGpu, LoadsEveryDtypeIntoGpuMemoryByteExact) {
  REQUIRE_GPUS(1);
  auto b = every_dtype(1000);
  std::string path = b.write(testing::test_dir() / "model.safetensors");
  auto loaded = load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_loaded(*api, b, loaded->tensors, 0);
  EXPECT_EQ(loaded->stats.report.at(Route::host).ops, 0u) << loaded->stats.report.summary();
  EXPECT_EQ(loaded->stats.report.total_bytes(), loaded->stats.bytes_read);
  EXPECT_EQ(loaded->allocations.size(), 1u);
  std::cout << "[          ] " << loaded->stats.report.summary() << "\n";
}

TEST(SafetensorsGpu, LoadIntoWritesOnlyTheTensorsBytes) {
  REQUIRE_GPUS(1);
  auto b = every_dtype(97);  // odd sizes: runs break and padding appears
  std::string path = b.write(testing::test_dir() / "model.safetensors");
  auto c = Checkpoint::open(path);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto plan = c->plan();
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const std::uint64_t guard = 4096, size = plan->regions[0].size_bytes + 2 * guard;
  ASSERT_TRUE(ferry::detail::make_current(*api, 0).ok());
  CUdeviceptr block = 0;
  ASSERT_EQ(api->cuMemAlloc_v2(&block, size), ferry::detail::CUDA_SUCCESS);
  ASSERT_EQ(api->cuMemsetD8_v2(block, 0xA5, size), ferry::detail::CUDA_SUCCESS);
  std::vector<void*> bases{reinterpret_cast<void*>(static_cast<std::uintptr_t>(block + guard))};
  auto stats = c->load_into(*plan, bases);
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  auto all = to_host(*api, 0, reinterpret_cast<void*>(static_cast<std::uintptr_t>(block)), size);
  std::vector<bool> owned(size, false);
  for (const auto& p : plan->placements) {
    const TensorInfo& t = c->tensors()[p.tensor];
    for (std::uint64_t k = 0; k < t.size_bytes(); ++k) owned[guard + p.offset + k] = true;
  }
  for (std::uint64_t k = 0; k < size; ++k) {
    if (!owned[k]) {
      ASSERT_EQ(all[k], 0xA5) << "byte " << k << " outside every tensor was written";
    }
  }
  (void)api->cuMemFree_v2(block);
}

TEST(SafetensorsGpu, HotLoadThroughput) {
  REQUIRE_GPUS(1);
  SafetensorsBuilder b;
  for (int i = 0; i < 16; ++i) b.add({"layer." + std::to_string(i) + ".w", "BF16", {2048, 4096}});  // 256 MiB
  std::string path = b.write(testing::test_dir() / "big.safetensors");
  auto first = load(path);  // warms the page cache, the staging pool and the thread pool
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto started = std::chrono::steady_clock::now();
  auto loaded = load(path);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_loaded(*api, b, loaded->tensors, 0);
  std::cout << "[          ] 256 MiB checkpoint, hot, second load in this process: " << seconds << " s, "
            << 0.25 / seconds << " GiB/s (" << loaded->stats.requests << " request(s)); "
            << loaded->stats.report.summary() << "\n";
}

TEST(SafetensorsGpu, DeviceMapOnTwoGpus) {
  REQUIRE_GPUS(2);
  auto b = every_dtype(100);
  std::string path = b.write(testing::test_dir() / "model.safetensors");
  LoadOptions o;
  o.device = 0;
  o.device_map = {{"BF16", 1}, {"F32.matrix", 1}, {"I8", kHostMemory}};
  auto loaded = load(path, o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  for (std::size_t i = 0; i < b.specs().size(); ++i) {
    const auto& spec = b.specs()[i];
    const LoadedTensor* t = loaded->find(spec.name);
    ASSERT_NE(t, nullptr);
    int want = spec.name.rfind("BF16.", 0) == 0 || spec.name == "F32.matrix" ? 1
               : spec.name.rfind("I8.", 0) == 0                             ? kHostMemory
                                                                             : 0;
    EXPECT_EQ(t->device, want) << spec.name;
    std::vector<std::uint8_t> got = want == kHostMemory
                                        ? std::vector<std::uint8_t>(static_cast<std::uint8_t*>(t->data),
                                                                    static_cast<std::uint8_t*>(t->data) + t->size_bytes)
                                        : to_host(*api, want, t->data, t->size_bytes);
    EXPECT_EQ(got, b.tensor_bytes(i)) << spec.name;
  }
}

TEST(SafetensorsGpu, ReplicasOnTwoGpusReadTheFileOnce) {
  REQUIRE_GPUS(2);
  SafetensorsBuilder b;
  for (int i = 0; i < 8; ++i) b.add({"w" + std::to_string(i), "F32", {1024, 1000 + static_cast<std::uint64_t>(i)}});
  std::string path = b.write(testing::test_dir() / "model.safetensors");
  LoadOptions o;
  o.device = 0;
  o.replicas = {1};
  o.max_request_bytes = 4 << 20;
  auto loaded = load(path, o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_loaded(*api, b, loaded->tensors, 0);
  ASSERT_EQ(loaded->replicas.size(), 1u);
  expect_loaded(*api, b, loaded->replicas[0], 1);
  EXPECT_EQ(loaded->stats.bytes_copied, loaded->stats.bytes_read);
  for (const auto& n : loaded->stats.notes) std::cout << "[          ] note: " << n << "\n";
}

// ---- saving from GPU memory

std::vector<SaveTensor> save_tensors_of(const LoadedCheckpoint& c) {
  std::vector<SaveTensor> out;
  for (const LoadedTensor& t : c.tensors) out.push_back({t.name, t.dtype, t.shape, t.data});
  return out;
}

TEST(SafetensorsGpu, SavesFromGpuMemoryTheFileItSavesFromHostMemory) {
  REQUIRE_GPUS(1);
  auto b = every_dtype(20000);  // about 11 MiB per 4-byte dtype: several staging windows
  auto dir = testing::test_dir();
  std::string path = b.write(dir / "model.safetensors");
  auto gpu = load(path);
  auto host = load(path, LoadOptions{.device = kHostMemory});
  ASSERT_TRUE(gpu.ok() && host.ok());
  SaveOptions o;
  o.metadata = std::map<std::string, std::string>{{"format", "pt"}};
  auto from_gpu = save((dir / "gpu.safetensors").string(), save_tensors_of(*gpu), o);
  auto from_host = save((dir / "host.safetensors").string(), save_tensors_of(*host), o);
  ASSERT_TRUE(from_gpu.ok()) << from_gpu.status().to_string();
  ASSERT_TRUE(from_host.ok()) << from_host.status().to_string();
  EXPECT_EQ(testing::read_whole_file(dir / "gpu.safetensors"), testing::read_whole_file(dir / "host.safetensors"));
  EXPECT_TRUE(from_gpu->staging_pinned);
  EXPECT_EQ(from_gpu->device_bytes, gpu->stats.bytes_read);
  std::cout << "[          ] " << from_gpu->file_bytes << " bytes from GPU memory in " << from_gpu->seconds << " s ("
            << from_gpu->sync_seconds << " s fdatasync); " << from_gpu->report.summary() << "\n";
}

TEST(SafetensorsGpu, ABackgroundSnapshotHoldsTheTensorsAsTheyWere) {
  REQUIRE_GPUS(1);
  auto b = every_dtype(20000);
  auto dir = testing::test_dir();
  std::string path = b.write(dir / "model.safetensors");
  auto gpu = load(path);
  ASSERT_TRUE(gpu.ok());
  SaveOptions o;
  o.metadata = std::map<std::string, std::string>{{"format", "pt"}};
  auto before = save((dir / "before.safetensors").string(), save_tensors_of(*gpu), o);
  ASSERT_TRUE(before.ok());
  auto handle = start_save((dir / "bg.safetensors").string(), save_tensors_of(*gpu), o);
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();
  ASSERT_TRUE(handle->snapshot().ok());
  ferry::detail::ScopedDeviceContext context(*api, 0);
  for (const LoadedTensor& t : gpu->tensors) {
    if (t.size_bytes) {
      ASSERT_EQ(api->cuMemsetD8_v2(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(t.data)), 0xEE,
                                   t.size_bytes),
                ferry::detail::CUDA_SUCCESS);
    }
  }
  auto stats = handle->result();
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_EQ(testing::read_whole_file(dir / "bg.safetensors"), testing::read_whole_file(dir / "before.safetensors"));
  std::cout << "[          ] snapshot " << stats->snapshot_seconds << " s of " << stats->seconds << " s\n";
}

}  // namespace
}  // namespace ferry::safetensors
