// Loading checkpoints through Ferry's engine on the fake CUDA driver (device memory is host memory there,
// so bytes are compared directly): host and GPU targets, caller-provided regions (nothing written outside
// the tensors), partial reads, sharded checkpoints, device maps, replicas by peer copies, progress and
// cancellation, request shaping, the staging cap, skipping cuFile's set-up, and failures mid-load.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "backends/staging_pool.hpp"
#include "base/host_memory.hpp"
#include "platform/cuda/buffer_kind.hpp"
#include "safetensors/checkpoint_state.hpp"
#include "safetensors/layout.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/safetensors_writer.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

using ::testing::HasSubstr;

namespace ferry::safetensors {
namespace {

namespace fs = std::filesystem;
using testing::Rule;
using testing::SafetensorsBuilder;
using testing::ScriptedSyscalls;

// Page-aligned host memory, freed with the test.
ferry::detail::HostMemory page_aligned(std::uint64_t size) { return ferry::detail::HostMemory::allocate(size).value(); }

std::vector<std::uint8_t> bytes_at(const void* p, std::uint64_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  return {b, b + n};
}

// Every dtype, a 0-d and an empty tensor, and odd sizes that leave later tensors at unaligned file offsets.
SafetensorsBuilder mixed_checkpoint() {
  SafetensorsBuilder b;
  b.metadata("format", "pt");
  b.add({"embed.weight", "BF16", {64, 33}})
      .add({"flags", "BOOL", {7}})
      .add({"layer.0.w", "F32", {17, 9}})  // after 7 bytes: unaligned in the file
      .add({"layer.0.scale", "F64", {}})
      .add({"layer.0.empty", "F16", {0, 4}})
      .add({"layer.1.w", "F8_E4M3", {5, 5}})
      .add({"layer.1.v", "F8_E5M2", {3}})
      .add({"layer.1.i8", "I8", {3}})
      .add({"layer.1.i16", "I16", {4}})
      .add({"layer.1.i32", "I32", {4}})
      .add({"layer.1.i64", "I64", {2}})
      .add({"layer.1.u8", "U8", {11}})
      .add({"layer.1.u16", "U16", {6}})
      .add({"layer.1.u32", "U32", {3}})
      .add({"layer.1.u64", "U64", {1}})
      .add({"head", "F16", {1000}});
  return b;
}

// One pread of a load's data, and the request it belonged to.
struct PreadSpan {
  std::size_t request;
  std::chrono::steady_clock::time_point started, ended;
};

class SafetensorsLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    ferry::detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    dir_ = testing::test_dir();
    fs::create_directories(dir_ / "root");  // an empty /proc and /etc: no nvidia_fs, no cufile.json
  }
  void TearDown() override {
    ferry::detail::process_staging_pool().clear();
    EXPECT_EQ(testing::fake_cuda_pending_copies(), 0u) << "copies still queued after the load returned";
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }

  static Config config() {
    Config c;
    c.set_compat_mode(CompatMode::on).set_task_size(16 * 1024).set_bounce_buffer_size(16 * 1024).set_threads(4);
    return c;
  }
  detail::Seams seams(ferry::detail::Syscalls* sys = nullptr) {
    detail::Seams s;
    s.files.gpu = &testing::fake_gpu_platform();
    if (sys) s.files.syscalls = sys;
    return s;
  }
  Result<Checkpoint> open(const std::string& path, OpenOptions o = {}, ferry::detail::Syscalls* sys = nullptr) {
    if (!o.config) o.config = config();
    return detail::open_checkpoint(path, o, seams(sys));
  }
  Checkpoint open_ok(const std::string& path, OpenOptions o = {}) {
    auto c = open(path, std::move(o));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(*c);
  }

  // Every loaded tensor holds the bytes its spec was written with, aligned for its dtype.
  static void expect_tensors(const SafetensorsBuilder& b, const std::vector<LoadedTensor>& got) {
    ASSERT_EQ(got.size(), b.specs().size());
    for (std::size_t i = 0; i < b.specs().size(); ++i) {
      const auto& spec = b.specs()[i];
      auto it = std::find_if(got.begin(), got.end(), [&](const LoadedTensor& t) { return t.name == spec.name; });
      ASSERT_NE(it, got.end()) << spec.name;
      EXPECT_STREQ(dtype_name(it->dtype), spec.dtype.c_str()) << spec.name;
      EXPECT_EQ(it->shape, spec.shape) << spec.name;
      auto want = b.tensor_bytes(i);
      ASSERT_EQ(it->size_bytes, want.size()) << spec.name;
      EXPECT_EQ(bytes_at(it->data, want.size()), want) << spec.name;
      // Where the framework's own allocator would put it: GPU kernels choose their code by alignment.
      const std::uint64_t alignment = it->device == kHostMemory ? kHostTensorAlignment : kDeviceTensorAlignment;
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(it->data) % alignment, 0u) << spec.name;
      EXPECT_NE(it->storage, nullptr);
    }
  }

  std::vector<PreadSpan> load_in_requests(std::uint64_t bytes, std::uint64_t piece, std::chrono::milliseconds slow);

  static int device_of(const void* p) {
    auto kind = ferry::detail::classify_buffer(&testing::fake_cuda_api(), p);
    EXPECT_TRUE(kind.ok());
    return kind.ok() && kind->kind == ferry::detail::MemoryKind::device ? kind->device : kHostMemory;
  }

  fs::path dir_;
};

TEST_F(SafetensorsLoad, IntoHostMemoryByteExact) {
  auto b = mixed_checkpoint();
  std::string path = b.write(dir_ / "model.safetensors");
  Checkpoint c = open_ok(path);
  LoadOptions o;
  o.device = kHostMemory;
  auto loaded = c.load(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_tensors(b, loaded->tensors);
  EXPECT_EQ(loaded->metadata.at("format"), "pt");
  ASSERT_EQ(loaded->allocations.size(), 1u);
  EXPECT_EQ(loaded->allocations[0]->device(), kHostMemory);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(loaded->allocations[0]->data()) % 4096, 0u);
  EXPECT_EQ(loaded->stats.bytes_read, c.data_bytes());
  EXPECT_EQ(loaded->stats.report.at(Route::host).bytes, c.data_bytes());
  for (const auto& t : loaded->tensors) EXPECT_EQ(t.device, kHostMemory);
}

TEST_F(SafetensorsLoad, IntoGpuMemoryByteExactWithOneAllocation) {
  testing::fake_cuda_script().copy_mode = testing::FakeCopyMode::deferred;  // copies land only when synchronised
  auto b = mixed_checkpoint();
  std::string path = b.write(dir_ / "model.safetensors");
  Checkpoint c = open_ok(path);
  {
    auto loaded = c.load();  // GPU 0 by default
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    expect_tensors(b, loaded->tensors);
    EXPECT_EQ(testing::fake_cuda_live_device(), 1u);
    for (const auto& t : loaded->tensors) {
      EXPECT_EQ(t.device, 0);
      if (t.size_bytes) {
        EXPECT_EQ(device_of(t.data), 0) << t.name;
      }
    }
    EXPECT_EQ(loaded->stats.report.at(Route::staged).bytes, c.data_bytes());
    EXPECT_EQ(testing::fake_cuda_counters().htod_bytes, c.data_bytes());
  }
  EXPECT_EQ(testing::fake_cuda_live_device(), 0u) << "the allocation outlived every tensor";
}

TEST_F(SafetensorsLoad, TensorsKeepTheirAllocationAlive) {
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "m.safetensors"));
  LoadedTensor kept;
  {
    auto loaded = c.load();
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    kept = *loaded->find("head");
  }
  EXPECT_EQ(testing::fake_cuda_live_device(), 1u);
  EXPECT_EQ(bytes_at(kept.data, kept.size_bytes), b.tensor_bytes(b.specs().size() - 1));
  kept = LoadedTensor{};
  EXPECT_EQ(testing::fake_cuda_live_device(), 0u);
}

// Tensors that follow one another in the file are read with one request, whatever their alignment in the
// file, and each lands at its own aligned address (the bounce buffers' bytes scattered to their places).
TEST_F(SafetensorsLoad, TensorsAdjacentInTheFileTakeOneRequestAndLandAligned) {
  auto mixed = mixed_checkpoint();  // odd sizes: most tensors sit at unaligned file offsets
  Checkpoint m = open_ok(mixed.write(dir_ / "mixed.safetensors"));
  for (int device : {kHostMemory, 0}) {
    LoadOptions o;
    o.device = device;
    auto loaded = m.load(o);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    EXPECT_EQ(loaded->stats.requests, 1u) << "adjacent tensors must be read with one request";
    expect_tensors(mixed, loaded->tensors);
    EXPECT_EQ(loaded->stats.bytes_read, m.data_bytes());
  }
}

// The layout: every tensor at the next multiple of its region's alignment, in file order; a region holds
// its tensors plus less than one alignment per tensor (never a multiple of the data, however the file
// aligns its tensors).
TEST_F(SafetensorsLoad, EveryTensorStartsAlignedWithLessThanOneAlignmentOfPaddingEach) {
  SafetensorsBuilder b;
  b.add({"small", "BOOL", {3}}).add({"one", "U8", {1}}).add({"big", "F32", {262144}});
  b.add({"tail", "U8", {5}}).add({"odd", "F32", {1000}}).add({"empty", "F16", {0}}).add({"last", "BF16", {77}});
  Checkpoint c = open_ok(b.write(dir_ / "layout.safetensors"));
  for (int device : {kHostMemory, 0}) {
    LoadOptions o;
    o.device = device;
    auto plan = c.plan(o);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    ASSERT_EQ(plan->regions.size(), 1u);
    const std::uint64_t alignment = device == kHostMemory ? kHostTensorAlignment : kDeviceTensorAlignment;
    EXPECT_EQ(plan->regions[0].alignment % alignment, 0u);
    std::uint64_t end = 0;
    for (const auto& p : plan->placements) {
      const TensorInfo& t = c.tensors()[p.tensor];
      EXPECT_EQ(p.offset % alignment, 0u) << t.name;
      EXPECT_GE(p.offset, end) << t.name << " overlaps the tensor before it";
      EXPECT_LT(p.offset - end, alignment) << t.name << " has an alignment or more of padding before it";
      end = p.offset + t.size_bytes();
    }
    EXPECT_EQ(plan->regions[0].size_bytes, end);
    EXPECT_LT(plan->regions[0].size_bytes, plan->read_bytes + alignment * c.tensors().size());
  }
}

TEST_F(SafetensorsLoad, LoadIntoWritesNothingOutsideTheTensors) {
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  for (int device : {kHostMemory, 0}) {
    LoadOptions o;
    o.device = device;
    auto plan = c.plan(o);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    ASSERT_EQ(plan->regions.size(), 1u);
    const auto& region = plan->regions[0];
    EXPECT_EQ(region.alignment, device == kHostMemory ? 4096u : 256u);
    std::vector<std::uint8_t> host;
    void* base = nullptr;
    const std::uint64_t guard = 4096;
    std::optional<ferry::detail::HostMemory> host_memory;
    if (device == kHostMemory) {
      base = host_memory.emplace(page_aligned(region.size_bytes + 2 * guard)).data();
    } else {
      base = testing::fake_cuda_alloc_device(region.size_bytes + 2 * guard);
    }
    std::memset(base, 0xA5, region.size_bytes + 2 * guard);
    void* region_base = static_cast<char*>(base) + guard;
    std::vector<void*> bases{region_base};
    auto stats = c.load_into(*plan, bases, o);
    ASSERT_TRUE(stats.ok()) << stats.status().to_string();
    std::vector<bool> owned(region.size_bytes + 2 * guard, false);
    for (const auto& p : plan->placements) {
      const TensorInfo& t = c.tensors()[p.tensor];
      auto i = static_cast<std::size_t>(std::find_if(b.specs().begin(), b.specs().end(),
                                                     [&](const auto& s) { return s.name == t.name; }) -
                                        b.specs().begin());
      EXPECT_EQ(p.offset % dtype_size(t.dtype), 0u) << t.name;
      EXPECT_EQ(bytes_at(static_cast<char*>(region_base) + p.offset, t.size_bytes()), b.tensor_bytes(i)) << t.name;
      for (std::uint64_t k = 0; k < t.size_bytes(); ++k) owned[guard + p.offset + k] = true;
    }
    const auto* all = static_cast<const std::uint8_t*>(base);
    for (std::size_t k = 0; k < owned.size(); ++k) {
      if (!owned[k]) {
        ASSERT_EQ(all[k], 0xA5) << "byte " << k << " outside every tensor was written (device " << device << ")";
      }
    }
    if (device != kHostMemory) testing::fake_cuda_free(base);
  }
}

TEST_F(SafetensorsLoad, LoadIntoRefusesBasesThatDoNotFitThePlan) {
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  LoadOptions o;
  o.device = kHostMemory;
  auto plan = c.plan(o);
  ASSERT_TRUE(plan.ok());
  std::vector<void*> none;
  auto r = c.load_into(*plan, none, o);
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  EXPECT_THAT(r.status().message(), HasSubstr("1 regions, but 0 base pointers"));
  std::vector<std::uint8_t> memory(plan->regions[0].size_bytes + 8192);
  auto misaligned = reinterpret_cast<std::uintptr_t>(memory.data()) | 1;
  std::vector<void*> bases{reinterpret_cast<void*>(misaligned)};
  r = c.load_into(*plan, bases, o);
  EXPECT_THAT(r.status().message(), HasSubstr("is not aligned to 4096 bytes"));
  LoadPlan shrunk = *plan;
  shrunk.regions[0].size_bytes = 16;
  ferry::detail::HostMemory aligned = page_aligned(4096);
  bases[0] = aligned.data();
  r = c.load_into(shrunk, bases, o);
  EXPECT_THAT(r.status().message(), HasSubstr("which holds 16 bytes"));
}

TEST_F(SafetensorsLoad, ReadIntoPartsOfTensors) {
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  const auto want = b.tensor_bytes(0);  // embed.weight, 64 x 33 BF16 = 4224 bytes
  void* dev = testing::fake_cuda_alloc_device(want.size());
  std::vector<std::uint8_t> host(100, 0xA5);
  std::vector<Destination> d{{"embed.weight", dev, 0, UINT64_MAX}, {"embed.weight", host.data() + 10, 66 * 3, 66 * 1}};
  auto r = c.read_into(d);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(bytes_at(dev, want.size()), want);
  EXPECT_EQ(std::vector<std::uint8_t>(host.begin() + 10, host.begin() + 76),
            std::vector<std::uint8_t>(want.begin() + 198, want.begin() + 264));
  EXPECT_EQ(host[9], 0xA5);
  EXPECT_EQ(host[76], 0xA5);
  EXPECT_EQ(r->requests, 2u);

  std::vector<Destination> missing{{"nope", host.data(), 0, 1}};
  auto m = c.read_into(missing);
  EXPECT_EQ(m.status().code(), ErrorCode::not_found);
  EXPECT_THAT(m.status().message(), HasSubstr("has no tensor \"nope\""));
  std::vector<Destination> past{{"flags", host.data(), 5, 3}};
  auto p = c.read_into(past);
  EXPECT_EQ(p.status().code(), ErrorCode::out_of_range);
  EXPECT_THAT(p.status().message(), HasSubstr("bytes [5, 8) are not all inside tensor \"flags\""));
  testing::fake_cuda_free(dev);
}

// Three shards and their index, as transformers writes them.
struct Sharded {
  std::vector<SafetensorsBuilder> shards;
  std::string index_path;
};

Sharded write_sharded(const fs::path& dir, bool include_unmapped = false) {
  Sharded s;
  s.shards.resize(3);
  s.shards[0].metadata("format", "pt").add({"model.embed.weight", "BF16", {128, 16}}).add({"model.layers.0.w", "F32", {33}});
  s.shards[1].metadata("format", "pt").add({"model.layers.1.w", "F32", {64, 3}}).add({"model.layers.1.b", "F16", {}});
  s.shards[2].add({"lm_head.weight", "BF16", {16, 128}}).add({"model.norm", "F32", {0}});
  if (include_unmapped) s.shards[2].add({"extra.buffer", "I64", {2}});
  nlohmann::json map;
  const char* names[] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                         "model-00003-of-00003.safetensors"};
  for (std::size_t i = 0; i < 3; ++i) {
    s.shards[i].write(dir / names[i]);
    for (const auto& spec : s.shards[i].specs()) {
      if (spec.name != "extra.buffer") map[spec.name] = names[i];
    }
  }
  nlohmann::json index = {{"metadata", {{"total_size", 12345}}}, {"weight_map", map}};
  s.index_path = (dir / "model.safetensors.index.json").string();
  std::ofstream(s.index_path) << index.dump(2);
  return s;
}

TEST_F(SafetensorsLoad, ShardedCheckpointLoadsEveryShard) {
  Sharded s = write_sharded(dir_);
  for (const std::string& path : {s.index_path, dir_.string()}) {  // the index, or its directory
    Checkpoint c = open_ok(path);
    ASSERT_EQ(c.files().size(), 3u);
    EXPECT_THAT(c.files()[0], HasSubstr("model-00001-of-00003.safetensors"));
    EXPECT_EQ(c.metadata().at("format"), "pt");
    EXPECT_TRUE(c.notes().empty());
    auto loaded = c.load();
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    std::size_t k = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      std::vector<LoadedTensor> part;
      for (const auto& spec : s.shards[i].specs()) part.push_back(*loaded->find(spec.name));
      expect_tensors(s.shards[i], part);
      for (const auto& spec : s.shards[i].specs()) EXPECT_EQ(c.find(spec.name)->shard, i) << spec.name;
      k += part.size();
    }
    EXPECT_EQ(loaded->tensors.size(), k);
    EXPECT_GE(loaded->stats.requests, 3u);
    ASSERT_EQ(loaded->allocations.size(), 1u) << "one allocation per device, whatever the number of shards";
  }
}

TEST_F(SafetensorsLoad, ShardedTensorsOutsideTheWeightMapAreLoadedWithANote) {
  Sharded s = write_sharded(dir_, true);
  Checkpoint c = open_ok(s.index_path);
  ASSERT_EQ(c.notes().size(), 1u);
  EXPECT_THAT(c.notes()[0], HasSubstr("1 tensor(s) of the shards are not in the weight map"));
  EXPECT_THAT(c.notes()[0], HasSubstr("\"extra.buffer\""));
  EXPECT_NE(c.find("extra.buffer"), nullptr);
}

TEST_F(SafetensorsLoad, ShardedCheckpointErrors) {
  Sharded s = write_sharded(dir_);
  auto write_index = [&](const nlohmann::json& j) {
    std::ofstream(s.index_path, std::ios::trunc) << j.dump();
    return s.index_path;
  };
  auto expect = [&](const std::string& path, ErrorCode code, const std::string& want) {
    auto r = open(path);
    ASSERT_THAT(r, StatusIs(code)) << want;
    EXPECT_THAT(r.status().message(), HasSubstr(want));
  };
  expect(write_index({{"weight_map", {{"model.embed.weight", "model-00002-of-00003.safetensors"}}}}),
         ErrorCode::invalid_argument,
         "the weight map puts tensor \"model.embed.weight\" in \"" + (dir_ / "model-00002-of-00003.safetensors").string() +
             "\", which has no such tensor");
  expect(write_index({{"weight_map", {{"ghost", "model-00001-of-00003.safetensors"}}}}), ErrorCode::invalid_argument,
         "has no such tensor");
  expect(write_index({{"weight_map", {{"x", "../outside.safetensors"}}}}), ErrorCode::invalid_argument,
         "names \"../outside.safetensors\", which is not a file inside the index's directory");
  expect(write_index({{"weight_map", {{"x", "/etc/passwd"}}}}), ErrorCode::invalid_argument, "not a file inside");
  expect(write_index({{"weight_map", {{"x", "missing.safetensors"}}}}), ErrorCode::not_found, "missing.safetensors");
  expect(write_index({{"metadata", {}}}), ErrorCode::invalid_argument, "no \"weight_map\"");
  expect(write_index({{"weight_map", {{"x", 3}}}}), ErrorCode::invalid_argument, "must name a file, not 3");
  std::ofstream(s.index_path, std::ios::trunc) << "{\"weight_map\": ";
  expect(s.index_path, ErrorCode::invalid_argument, "Invalid safetensors index");

  // The same tensor in two shards.
  SafetensorsBuilder twin;
  twin.add({"model.embed.weight", "U8", {4}});
  twin.write(dir_ / "twin.safetensors");
  expect(write_index({{"weight_map", {{"model.embed.weight", "model-00001-of-00003.safetensors"},
                                      {"other", "twin.safetensors"}}}}),
         ErrorCode::invalid_argument, "tensor \"model.embed.weight\" is in both");
}

TEST_F(SafetensorsLoad, DirectoriesResolveToTheirCheckpoint) {
  SafetensorsBuilder b;
  b.add({"w", "U8", {3}});
  fs::create_directories(dir_ / "one");
  b.write(dir_ / "one" / "weights.safetensors");
  Checkpoint c = open_ok((dir_ / "one").string());
  EXPECT_THAT(c.files()[0], HasSubstr("weights.safetensors"));
  b.write(dir_ / "one" / "other.safetensors");
  auto r = open((dir_ / "one").string());
  EXPECT_EQ(r.status().code(), ErrorCode::not_found);
  EXPECT_THAT(r.status().message(), HasSubstr("2 *.safetensors file(s)"));
  b.write(dir_ / "one" / "model.safetensors");
  Checkpoint m = open_ok((dir_ / "one").string());
  EXPECT_THAT(m.files()[0], HasSubstr("model.safetensors"));
}

TEST_F(SafetensorsLoad, MalformedFilesFailAtOpenNamingTheFile) {
  SafetensorsBuilder b;
  b.add({"w", "F33", {3}});
  std::string path = b.write(dir_ / "bad.safetensors");
  auto r = open(path);
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(r.status().path(), path);
  EXPECT_THAT(r.status().message(), HasSubstr("Invalid safetensors header in \"" + path + "\": tensor \"w\": unknown dtype"));
  auto missing = open((dir_ / "none.safetensors").string());
  EXPECT_EQ(missing.status().code(), ErrorCode::not_found);
  std::string tiny = testing::write_bytes(dir_ / "tiny.safetensors", {1, 2, 3});
  EXPECT_THAT(open(tiny).status().message(), HasSubstr("the file is 3 bytes, too short"));
  std::string past = testing::write_bytes(dir_ / "past.safetensors", testing::safetensors_bytes("{}", {}, 99));
  EXPECT_THAT(open(past).status().message(), HasSubstr("the header length 99 points past the end of the file"));
  OpenOptions small;
  small.max_header_bytes = 8;
  EXPECT_THAT(open(b.write(dir_ / "big.safetensors"), small).status().message(), HasSubstr("more than the limit of 8"));
  auto h = read_header(path);
  EXPECT_EQ(h.status().code(), ErrorCode::invalid_argument);
}

TEST_F(SafetensorsLoad, ReadHeaderReadsOnlyTheHeader) {
  auto b = mixed_checkpoint();
  std::string path = b.write(dir_ / "model.safetensors");
  auto h = read_header(path);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->tensors.size(), b.specs().size());
  EXPECT_EQ(h->metadata.at("format"), "pt");
}

TEST_F(SafetensorsLoad, DeviceMapSpreadsTensorsOverGpusAndHost) {
  testing::fake_cuda_script().device_count = 2;
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  LoadOptions o;
  o.device = 0;
  o.device_map = {{"layer", 1}, {"layer.1.u8", kHostMemory}, {"head", 1}};
  auto loaded = c.load(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_tensors(b, loaded->tensors);
  EXPECT_EQ(loaded->allocations.size(), 3u);  // host, GPU 0, GPU 1
  for (const auto& t : loaded->tensors) {
    int want = t.name == "layer.1.u8" ? kHostMemory
               : (t.name.rfind("layer.", 0) == 0 || t.name == "head") ? 1
                                                                       : 0;
    EXPECT_EQ(t.device, want) << t.name;
    if (t.size_bytes) {
      EXPECT_EQ(device_of(t.data), want) << t.name;
    }
  }
}

TEST_F(SafetensorsLoad, DeviceMapKeysMatchWholeNameComponents) {
  LoadOptions o;
  o.device = 0;
  o.device_map = {{"model.layers.1", 1}, {"model.layers.10", 2}, {"model", 3}, {"", 4}};
  EXPECT_EQ(detail::device_for("model.layers.1.mlp.w", o), 1);
  EXPECT_EQ(detail::device_for("model.layers.10.mlp.w", o), 2);
  EXPECT_EQ(detail::device_for("model.layers.11.mlp.w", o), 3);
  EXPECT_EQ(detail::device_for("model.layers.1", o), 1);
  EXPECT_EQ(detail::device_for("modelx", o), 4);
  EXPECT_EQ(detail::device_for("lm_head", o), 4);
  o.device_map.pop_back();
  EXPECT_EQ(detail::device_for("lm_head", o), 0);
}

TEST_F(SafetensorsLoad, ReplicasReadTheFileOnceAndCopyGpuToGpu) {
  testing::fake_cuda_script().device_count = 3;
  testing::fake_cuda_script().copy_mode = testing::FakeCopyMode::deferred;
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  LoadOptions o;
  o.device = 0;
  o.replicas = {2, 1};
  o.max_request_bytes = 4096;  // several pieces, each copied as soon as it is read
  auto loaded = c.load(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_tensors(b, loaded->tensors);
  ASSERT_EQ(loaded->replicas.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    expect_tensors(b, loaded->replicas[k]);
    for (const auto& t : loaded->replicas[k]) {
      EXPECT_EQ(t.device, o.replicas[k]);
      if (t.size_bytes) {
        EXPECT_EQ(device_of(t.data), o.replicas[k]) << t.name;
      }
    }
  }
  auto counters = testing::fake_cuda_counters();
  EXPECT_EQ(counters.htod_bytes, c.data_bytes()) << "the file must be read once";
  // Each piece's span of the region is copied: its tensors and the padding between them.
  const std::uint64_t region_bytes = loaded->allocations[0]->size_bytes();
  EXPECT_GE(counters.peer_bytes, 2 * c.data_bytes());
  EXPECT_LE(counters.peer_bytes, 2 * region_bytes);
  EXPECT_GT(counters.peer_copies, 2u);
  EXPECT_EQ(counters.peer_access_enabled, 4u);  // both ways, for each pair
  EXPECT_EQ(loaded->stats.bytes_copied, counters.peer_bytes);
  EXPECT_EQ(loaded->allocations.size(), 3u);
}

TEST_F(SafetensorsLoad, ReplicasWithoutPeerAccessStillCopyAndSaySo) {
  testing::fake_cuda_script().device_count = 2;
  testing::fake_cuda_script().peer_access = false;
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  LoadOptions o;
  o.replicas = {1};
  auto loaded = c.load(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_tensors(b, loaded->replicas[0]);
  EXPECT_THAT(loaded->stats.notes, ::testing::Contains(HasSubstr("GPU 0 and GPU 1 have no peer access")));
}

TEST_F(SafetensorsLoad, BadPlacementOptionsAreRefused) {
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  auto expect = [&](LoadOptions o, const std::string& want) {
    auto r = c.plan(o);
    EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument) << want;
    EXPECT_THAT(r.status().message(), HasSubstr(want));
  };
  LoadOptions o;
  o.device = -2;
  expect(o, "device -2 is neither a GPU nor host memory");
  o = {};
  o.device = kHostMemory;
  o.replicas = {1};
  expect(o, "replicas need a GPU");
  o = {};
  o.replicas = {1, 1};
  expect(o, "GPU 1 appears twice");
  o = {};
  o.replicas = {0};
  expect(o, "GPU 0 appears twice");
  o = {};
  o.replicas = {1};
  o.device_map = {{"x", 0}};
  expect(o, "cannot be combined with a device map");
  o = {};
  o.device_map = {{"x", -5}};
  expect(o, "sends \"x\" to device -5");
  // A GPU that does not exist fails at allocation, naming it.
  testing::fake_cuda_script().device_count = 1;
  LoadOptions three;
  three.device = 3;
  auto r = c.load(three);
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  EXPECT_THAT(r.status().message(), HasSubstr("CUDA device 3 does not exist"));
}

TEST_F(SafetensorsLoad, ProgressIsMonotonicAndEndsAtTheTotal) {
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  LoadOptions o;
  o.max_request_bytes = 4096;
  o.max_requests_in_flight = 1;
  o.progress_interval = std::chrono::milliseconds(0);
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    calls.emplace_back(done, total);
    return true;
  };
  auto loaded = c.load(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  ASSERT_GE(calls.size(), 3u);
  EXPECT_EQ(calls.front(), std::make_pair(std::uint64_t{0}, c.data_bytes()));
  EXPECT_EQ(calls.back(), std::make_pair(c.data_bytes(), c.data_bytes()));
  for (std::size_t i = 1; i < calls.size(); ++i) EXPECT_LE(calls[i - 1].first, calls[i].first);
}

TEST_F(SafetensorsLoad, CancelStopsBetweenRequests) {
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  int calls = 0;
  LoadOptions o;
  o.device = kHostMemory;
  o.max_request_bytes = 4096;
  o.max_requests_in_flight = 1;
  o.progress_interval = std::chrono::milliseconds(0);
  o.progress = [&](std::uint64_t, std::uint64_t) { return ++calls < 3; };
  auto r = c.load(o);
  EXPECT_EQ(r.status().code(), ErrorCode::cancelled);
  EXPECT_THAT(r.status().message(), HasSubstr("was cancelled after"));
  EXPECT_EQ(calls, 3);
}

TEST_F(SafetensorsLoad, RequestShapingSplitsReadsAtPageBoundaries) {
  SafetensorsBuilder b;
  b.add({"big", "U8", {100000}});
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  LoadOptions o;
  o.max_request_bytes = 16384;
  o.max_requests_in_flight = 2;
  auto loaded = c.load(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_tensors(b, loaded->tensors);
  EXPECT_EQ(loaded->stats.requests, 7u);  // 100000 bytes from an unaligned start, cut at 4 KiB file offsets
}

// Loads one U8 tensor of `bytes` into host memory in requests of `piece` bytes (cut at page boundaries, as
// LoadOptions::max_request_bytes makes them), every pread slowed by `slow`; returns each pread of the data
// with the request it belongs to, after checking the bytes loaded.
std::vector<PreadSpan> SafetensorsLoad::load_in_requests(std::uint64_t bytes, std::uint64_t piece,
                                                         std::chrono::milliseconds slow) {
  SafetensorsBuilder b;
  b.add({"big", "U8", {bytes}});
  ScriptedSyscalls sys;
  auto c = open(b.write(dir_ / "model.safetensors"), {}, &sys);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return {};
  const std::uint64_t data = c->find("big")->file_offset;
  sys.add(Rule::on(testing::Op::pread).sleeps(slow));
  LoadOptions o;
  o.device = kHostMemory;
  o.max_request_bytes = piece;
  const auto since = std::chrono::steady_clock::now();
  auto loaded = c->load(o);
  EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
  if (!loaded.ok()) return {};
  expect_tensors(b, loaded->tensors);
  std::vector<PreadSpan> out;
  for (const auto& call : sys.calls(testing::Op::pread)) {
    if (call.started < since || call.offset < data) continue;
    std::size_t request = 0;
    for (std::uint64_t end = (data + piece) / 4096 * 4096; call.offset >= end; end = (end + piece) / 4096 * 4096) {
      ++request;
    }
    out.push_back({request, call.started, call.ended});
  }
  return out;
}

// A request with a task for every thread runs alone (its jobs already keep every worker busy; another one in
// flight only pins more staging memory), so a shard's reads end before the next shard's begin.
TEST_F(SafetensorsLoad, RequestsThatKeepEveryThreadBusyRunOneAtATime) {
  // Requests of 64 KiB: 4 tasks of 16 KiB each for 4 threads.
  auto spans = load_in_requests(4 * 64 * 1024, 64 * 1024, std::chrono::milliseconds(5));
  ASSERT_GE(spans.size(), 16u);
  for (const auto& later : spans) {
    for (const auto& earlier : spans) {
      if (earlier.request < later.request) {
        EXPECT_LE(earlier.ended, later.started) << "request " << later.request << " began before request "
                                                << earlier.request << " ended";
      }
    }
  }
}

// Requests smaller than the threads go together until each thread has a task.
TEST_F(SafetensorsLoad, SmallRequestsGoTogetherUntilEveryThreadHasOne) {
  // Requests of one 16 KiB task each for 4 threads.
  auto spans = load_in_requests(8 * 16 * 1024, 16 * 1024, std::chrono::milliseconds(20));
  std::size_t most_at_once = 0;  // distinct requests with a pread under way when some pread began
  for (const auto& s : spans) {
    std::set<std::size_t> under_way;
    for (const auto& other : spans) {
      if (other.started <= s.started && s.started < other.ended) under_way.insert(other.request);
    }
    most_at_once = std::max(most_at_once, under_way.size());
  }
  EXPECT_GE(most_at_once, 2u) << "small requests ran one at a time";
  EXPECT_LE(most_at_once, 4u) << "more requests ran at once than there are threads";
}

TEST_F(SafetensorsLoad, StagingCapShrinksBuffersThenThreadsThenRequests) {
  SafetensorsBuilder b;
  b.add({"w", "U8", {4096}});
  std::string path = b.write(dir_ / "model.safetensors");
  OpenOptions o;
  Config cfg = config();
  cfg.set_threads(8).set_bounce_buffer_size(4 << 20).set_bounce_buffers_per_thread(2);
  o.config = cfg;
  o.max_staging_bytes = 8 << 20;  // 8 threads x 2 x 4 MiB = 64 MiB before
  Checkpoint c = open_ok(path, o);
  EXPECT_EQ(c.config().bounce_buffer_size(), 512u * 1024);  // halved until 8 x 2 buffers fit
  EXPECT_EQ(c.config().threads(), 8u);
  EXPECT_EQ(detail::CheckpointState::of(c).max_requests_by_staging, 1u);
  // Room for two requests of the configured shape: nothing shrinks, two run at once.
  cfg.set_threads(2);
  o.config = cfg;
  o.max_staging_bytes = 32 << 20;
  Checkpoint two = open_ok(path, o);
  EXPECT_EQ(two.config().bounce_buffer_size(), 4u << 20);
  EXPECT_EQ(detail::CheckpointState::of(two).max_requests_by_staging, 2u);
  o.config = config();
  cfg.set_threads(8);
  o.config = cfg;
  o.max_staging_bytes = 1 << 20;
  Checkpoint small = open_ok(path, o);
  EXPECT_EQ(small.config().bounce_buffer_size(), 256u * 1024);
  EXPECT_EQ(small.config().threads(), 2u);
  auto loaded = small.load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_THAT(loaded->stats.notes, ::testing::Contains(HasSubstr("max_staging_bytes 1.00 MiB: 2 threads")));
  o.max_staging_bytes = 100 * 1024;
  auto r = open(path, o);
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  EXPECT_THAT(r.status().message(), HasSubstr("max_staging_bytes 102400 is below the least"));
}

// compat auto where cuFile could only use its POSIX path (the fake platform's checks: no nvidia_fs, no
// P2PDMA): the engine's route selection decides staged without opening cuFile's driver.
TEST_F(SafetensorsLoad, CompatAutoSkipsCufileWhereItCouldNotGoDirect) {
  SafetensorsBuilder b;
  b.add({"w", "F32", {4096}});
  std::string path = b.write(dir_ / "model.safetensors");
  OpenOptions o;
  Config automatic = config();
  automatic.set_compat_mode(CompatMode::automatic).set_gds_threshold(0);
  o.config = automatic;
  Checkpoint c = open_ok(path, o);
  auto loaded = c.load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->stats.report.at(Route::staged).bytes, c.data_bytes());
  bool reason = false;
  for (const auto& rc : loaded->stats.report.reasons) reason |= rc.reason == Reason::nvidia_fs_not_loaded;
  EXPECT_TRUE(reason) << loaded->stats.report.summary();
  EXPECT_EQ(testing::fake_cufile_counters().driver_opens, 0u);
}

TEST_F(SafetensorsLoad, RequireGdsStillReadsHeadersButRefusesHostData) {
  SafetensorsBuilder b;
  b.add({"w", "F32", {16}});
  OpenOptions o;
  Config strict = config();
  strict.set_require(Requirement::gds);
  o.config = strict;
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"), o);
  LoadOptions host;
  host.device = kHostMemory;
  auto r = c.load(host);
  EXPECT_EQ(r.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(r.status().message(), HasSubstr("Could not load tensor \"w\""));
  EXPECT_THAT(r.status().message(), HasSubstr("require=gds"));
}

TEST_F(SafetensorsLoad, TruncatedAfterOpenFailsBeforeWritingAnything) {
  auto b = mixed_checkpoint();
  std::string path = b.write(dir_ / "model.safetensors");
  Checkpoint c = open_ok(path);
  fs::resize_file(path, fs::file_size(path) - 10);
  LoadOptions o;
  o.device = kHostMemory;
  auto plan = c.plan(o);
  ASSERT_TRUE(plan.ok());
  ferry::detail::HostMemory memory = page_aligned(plan->regions[0].size_bytes + 4096);
  void* base = memory.data();
  std::memset(base, 0xA5, plan->regions[0].size_bytes);
  std::vector<void*> bases{base};
  auto r = c.load_into(*plan, bases, o);
  EXPECT_EQ(r.status().code(), ErrorCode::io_error);
  EXPECT_THAT(r.status().message(), HasSubstr("shorter than the"));
  EXPECT_THAT(r.status().message(), HasSubstr("nothing was loaded"));
  EXPECT_EQ(r.status().path(), path);
  const auto* p = static_cast<const std::uint8_t*>(base);
  EXPECT_TRUE(std::all_of(p, p + plan->regions[0].size_bytes, [](std::uint8_t x) { return x == 0xA5; }));
}

TEST_F(SafetensorsLoad, ReadErrorsNameTheFileAndTheTensors) {
  auto b = mixed_checkpoint();
  std::string path = b.write(dir_ / "model.safetensors");
  ScriptedSyscalls sys;
  auto c = open(path, {}, &sys);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const TensorInfo* head = c->find("head");
  sys.add(Rule::on(testing::Op::pread).covering(head->file_offset + 10).fail(EIO));
  LoadOptions o;
  o.device = kHostMemory;
  auto r = c->load(o);
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error));
  EXPECT_EQ(r.status().sys_errno(), EIO);
  EXPECT_EQ(r.status().path(), path);
  EXPECT_THAT(r.status().message(), HasSubstr("Could not load tensors"));
  EXPECT_THAT(r.status().message(), HasSubstr("\"head\""));
  EXPECT_THAT(r.status().message(), HasSubstr("of \"" + path + "\""));
}

TEST_F(SafetensorsLoad, AFileThatEndsEarlyDuringTheLoadIsAnError) {
  SafetensorsBuilder b;
  b.add({"a", "U8", {5000}}).add({"b", "U8", {5000}});
  std::string path = b.write(dir_ / "model.safetensors");
  ScriptedSyscalls sys;
  auto c = open(path, {}, &sys);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  sys.add(Rule::on(testing::Op::pread).covering(c->find("b")->file_offset + 100).returns_eof());
  LoadOptions o;
  o.device = kHostMemory;
  auto r = c->load(o);
  EXPECT_EQ(r.status().code(), ErrorCode::io_error);
  // The engine sees the short read first: the file shrank under a read planned by its size.
  EXPECT_THAT(r.status().message(), HasSubstr("Could not load tensors"));
  EXPECT_THAT(r.status().message(), HasSubstr("shrank during the read"));
}

TEST_F(SafetensorsLoad, EmptyCheckpointLoadsNothing) {
  std::string path = testing::write_bytes(dir_ / "empty.safetensors", testing::safetensors_bytes("{}", {}));
  Checkpoint c = open_ok(path);
  auto loaded = c.load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_TRUE(loaded->tensors.empty());
  EXPECT_TRUE(loaded->allocations.empty());
  EXPECT_EQ(loaded->stats.requests, 0u);
}

TEST_F(SafetensorsLoad, ManyConcurrentLoadsOfOneCheckpoint) {
  auto b = mixed_checkpoint();
  Checkpoint c = open_ok(b.write(dir_ / "model.safetensors"));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      LoadOptions o;
      o.device = i % 2 == 0 ? kHostMemory : 0;
      o.max_request_bytes = 8192;
      auto loaded = c.load(o);
      if (!loaded.ok()) {
        ++failures;
        return;
      }
      for (std::size_t k = 0; k < b.specs().size(); ++k) {
        const LoadedTensor* t = loaded->find(b.specs()[k].name);
        if (bytes_at(t->data, t->size_bytes) != b.tensor_bytes(k)) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace ferry::safetensors
