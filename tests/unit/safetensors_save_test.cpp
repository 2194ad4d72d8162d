// Saving checkpoints: the header the reference writes (order, JSON, padding, escaping) checked against
// headers written out by hand from the format's rules; files read back by Ferry's own loader; GPU tensors
// through pinned staging on the fake CUDA driver (copies that land only when synchronised); bounded staging,
// background saves (snapshot before the writes end, errors and cancelling through the handle); the
// destination rules; sharding as huggingface_hub splits, and the index.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <thread>

#include <nlohmann/json.hpp>

#include "backends/staging_pool.hpp"
#include "ferry/config.hpp"
#include "safetensors/checkpoint_state.hpp"
#include "safetensors/saver.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_platform.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace ferry::safetensors {
namespace {

namespace fs = std::filesystem;
using testing::Op;
using testing::Rule;
using testing::ScriptedSyscalls;
using testing::StatusIs;

std::string json_of(const HeaderImage& h) { return h.bytes.substr(8); }

std::uint64_t prefix_of(const HeaderImage& h) {
  std::uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(h.bytes[b]);
  return n;
}

std::string padded(std::string json) {
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

HeaderImage header_ok(const std::vector<SaveTensor>& t, std::optional<std::map<std::string, std::string>> m = {}) {
  auto h = serialize_header(t, m);
  EXPECT_TRUE(h.ok()) << h.status().to_string();
  return h.ok() ? *h : HeaderImage{};
}

// ---- the header, as the format's documentation and the reference's documented behaviour have it ----

TEST(SafetensorsSaveHeader, OrdersByDescendingDtypeAlignmentThenName) {
  auto h = header_ok({{"b", Dtype::f32, {2}}, {"a", Dtype::f32, {1}}, {"c", Dtype::u8, {3}},
                      {"z", Dtype::f64, {}}, {"m", Dtype::bf16, {2, 2}}});
  EXPECT_EQ(json_of(h), padded(R"({"z":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
                               R"("a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]},)"
                               R"("m":{"dtype":"BF16","shape":[2,2],"data_offsets":[20,28]},)"
                               R"("c":{"dtype":"U8","shape":[3],"data_offsets":[28,31]}})"));
  EXPECT_THAT(h.order, ElementsAre(3, 1, 0, 4, 2));
  EXPECT_EQ(h.data_bytes, 31u);
  EXPECT_EQ(prefix_of(h), json_of(h).size());
  EXPECT_EQ(json_of(h).size() % 8, 0u);
}

TEST(SafetensorsSaveHeader, TheReferenceDtypeOrderIsItsEnumOrderReversed) {
  // One tensor per dtype, all named alike: only the dtype decides. The reference's enum: BOOL, U8, I8,
  // F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64.
  std::vector<SaveTensor> t;
  for (std::size_t d = 0; d < kDtypeCount; ++d) t.push_back({"x" + std::to_string(d), static_cast<Dtype>(d), {1}});
  auto h = header_ok(t);
  std::vector<std::string> order;
  for (std::size_t i : h.order) order.push_back(dtype_name(t[i].dtype));
  EXPECT_THAT(order, ElementsAre("U64", "I64", "F64", "F32", "U32", "I32", "BF16", "F16", "U16", "I16", "F8_E4M3",
                                 "F8_E5M2", "I8", "U8", "BOOL"));
}

TEST(SafetensorsSaveHeader, NamesCompareBytewise) {
  auto h = header_ok({{"\xc3\xa9", Dtype::u8, {1}}, {"a", Dtype::u8, {1}}, {"B", Dtype::u8, {1}}, {"", Dtype::u8, {1}}});
  EXPECT_THAT(h.order, ElementsAre(3, 2, 1, 0));  // "", "B", "a", "é"
}

TEST(SafetensorsSaveHeader, MetadataComesFirstWithSortedKeys) {
  auto h = header_ok({{"w", Dtype::i32, {2}}}, std::map<std::string, std::string>{{"b", "2"}, {"a", "1"}});
  EXPECT_EQ(json_of(h),
            padded(R"({"__metadata__":{"a":"1","b":"2"},"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})"));
}

TEST(SafetensorsSaveHeader, EmptyCheckpointsAndEmptyMetadata) {
  auto none = header_ok({});
  EXPECT_EQ(json_of(none), "{}      ");
  EXPECT_EQ(prefix_of(none), 8u);
  EXPECT_EQ(none.file_bytes(), 16u);
  auto empty_metadata = header_ok({}, std::map<std::string, std::string>{});
  EXPECT_EQ(json_of(empty_metadata), padded(R"({"__metadata__":{}})"));
  auto only_metadata = header_ok({}, std::map<std::string, std::string>{{"format", "pt"}});
  EXPECT_EQ(json_of(only_metadata), padded(R"({"__metadata__":{"format":"pt"}})"));
}

TEST(SafetensorsSaveHeader, PadsWithSpacesToMultiplesOfEightForEveryLength) {
  for (std::size_t len = 1; len <= 16; ++len) {
    auto h = header_ok({{std::string(len, 'n'), Dtype::u8, {0}}});
    const std::string raw = "{\"" + std::string(len, 'n') + R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})";
    EXPECT_EQ(json_of(h), padded(raw)) << len;
    EXPECT_EQ(json_of(h).find_first_not_of(' ', raw.size()), std::string::npos);
  }
}

TEST(SafetensorsSaveHeader, EscapesStringsAsSerdeJson) {
  auto h = header_ok({{"q\"b\\n\nt\tc\x01" "d\x7f" "e\xc3\xa9", Dtype::u8, {1}}},
                     std::map<std::string, std::string>{{"k\x1f", "v\r\b\f/"}});
  EXPECT_EQ(json_of(h), padded("{\"__metadata__\":{\"k\\u001f\":\"v\\r\\b\\f/\"},"
                               "\"q\\\"b\\\\n\\nt\\tc\\u0001d\x7f" "e\xc3\xa9\":"
                               "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}"));
}

TEST(SafetensorsSaveHeader, WhatFerryWritesFerryReadsBack) {
  std::vector<SaveTensor> t = {{"emb", Dtype::bf16, {3, 5}}, {"scalar", Dtype::f64, {}}, {"flags", Dtype::boolean, {7}},
                               {"none", Dtype::f16, {0, 4}}, {"i", Dtype::i64, {2}}};
  auto h = header_ok(t, std::map<std::string, std::string>{{"format", "pt"}});
  std::string image = h.bytes + std::string(h.data_bytes, '\0');
  auto parsed = parse_file_image(image.data(), image.size(), "mem");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  for (std::size_t i = 0; i < t.size(); ++i) {
    const TensorInfo* got = parsed->find(t[i].name);
    ASSERT_NE(got, nullptr) << t[i].name;
    EXPECT_EQ(got->dtype, t[i].dtype);
    EXPECT_EQ(got->shape, t[i].shape);
    EXPECT_EQ(got->data_begin, h.data_begin[i]);
    EXPECT_EQ(got->size_bytes(), h.size_bytes[i]);
  }
}

TEST(SafetensorsSaveHeader, RefusesWhatTheFormatCannotHold) {
  EXPECT_THAT(serialize_header(std::vector<SaveTensor>{{"a", Dtype::u8, {1}}, {"a", Dtype::u8, {1}}}, {}),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("tensor \"a\" appears twice")));
  EXPECT_THAT(serialize_header(std::vector<SaveTensor>{{"__metadata__", Dtype::u8, {1}}}, {}),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("reserves that key")));
  for (std::string bad : {std::string("\xc0\xaf"), std::string("\xed\xa0\x80"), std::string("ab\xe2\x82"),
                          std::string("\xf4\x90\x80\x80")}) {
    EXPECT_THAT(serialize_header(std::vector<SaveTensor>{{bad, Dtype::u8, {1}}}, {}),
                StatusIs(ErrorCode::invalid_argument, HasSubstr("is not valid UTF-8")));
  }
  EXPECT_THAT(serialize_header({}, std::map<std::string, std::string>{{"k", "\xff"}}),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("metadata entry \"k\"")));
  EXPECT_THAT(serialize_header(std::vector<SaveTensor>{{"big", Dtype::f64, {1ull << 32, 1ull << 31}}}, {}),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("tensor \"big\": its shape of F64 is more than 2^64")));
}

// ---- files ----

// Host or fake-GPU memory holding a tensor's bytes (a pattern that differs per tensor and per byte).
struct Memory {
  std::vector<std::uint8_t> host;
  void* device = nullptr;
  ~Memory() {
    if (device) testing::fake_cuda_free(device);
  }
};

class SafetensorsSave : public ::testing::Test {
 protected:
  void SetUp() override {
    ferry::detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    dir_ = testing::test_dir();
  }
  void TearDown() override {
    ferry::detail::process_staging_pool().clear();
    EXPECT_EQ(testing::fake_cuda_pending_copies(), 0u);
    testing::reset_fake_cuda();
  }

  ferry::detail::OpenOptions seams(ferry::detail::Syscalls* sys = nullptr) {
    ferry::detail::OpenOptions o;
    o.gpu = &testing::fake_gpu_platform();
    if (sys) o.syscalls = sys;
    return o;
  }
  static SaveOptions options() {
    SaveOptions o;
    Config c;
    c.set_task_size(64 * 1024).set_threads(4);
    o.config = c;
    return o;
  }

  // Tensors of every dtype with pattern bytes, in host memory or (device = true) fake GPU memory.
  std::vector<SaveTensor> tensors(std::vector<std::unique_ptr<Memory>>& keep, bool device, std::uint64_t scale = 1) {
    std::vector<SaveTensor> t = {{"embed.weight", Dtype::bf16, {64 * scale, 33}}, {"flags", Dtype::boolean, {7}},
                                 {"layer.0.w", Dtype::f32, {17, 9}},        {"scale", Dtype::f64, {}},
                                 {"empty", Dtype::f16, {0, 4}},             {"f8", Dtype::f8_e4m3, {5, 5}},
                                 {"i64", Dtype::i64, {3}},                  {"u16", Dtype::u16, {6}}};
    std::uint64_t seed = 0;
    for (SaveTensor& s : t) {
      std::uint64_t n = dtype_size(s.dtype);
      for (auto d : s.shape) n *= d;
      auto m = std::make_unique<Memory>();
      m->host = testing::pattern(seed += 977, n);
      if (device) {
        m->device = testing::fake_cuda_alloc_device(std::max<std::uint64_t>(n, 1));
        std::memcpy(m->device, m->host.data(), n);
        s.data = m->device;
      } else {
        s.data = m->host.data();
      }
      keep.push_back(std::move(m));
    }
    return t;
  }

  // The file the reference would write: the header, then each tensor's bytes in the header's order.
  static std::vector<std::uint8_t> expected_file(const std::vector<SaveTensor>& t,
                                                 const std::vector<std::unique_ptr<Memory>>& keep,
                                                 const SaveOptions& o) {
    auto h = serialize_header(t, o.metadata);
    std::vector<std::uint8_t> out(h->bytes.begin(), h->bytes.end());
    for (std::size_t i : h->order) out.insert(out.end(), keep[i]->host.begin(), keep[i]->host.end());
    return out;
  }

  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

TEST_F(SafetensorsSave, HostTensorsMakeTheReferenceFileAndReadBack) {
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, /*device=*/false);
  SaveOptions o = options();
  o.metadata = std::map<std::string, std::string>{{"format", "pt"}};
  const std::string path = (dir_ / "model.safetensors").string();
  auto stats = detail::save_with(path, t, o, seams());
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_EQ(testing::read_whole_file(path), expected_file(t, keep, o));
  EXPECT_EQ(stats->file_bytes, fs::file_size(path));
  EXPECT_EQ(stats->tensors, t.size());
  EXPECT_FALSE(stats->staging_pinned);
  EXPECT_EQ(stats->device_bytes, 0u);
  EXPECT_FALSE(stats->replaced);
  EXPECT_EQ(testing::fake_cuda_counters().dtoh_async_copies, 0u);

  auto ckpt = Checkpoint::open(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ(ckpt->metadata().at("format"), "pt");
  EXPECT_EQ(ckpt->tensors().size(), t.size());
  EXPECT_THAT(listing(), ElementsAre("model.safetensors")) << "no temporary file may remain";
}

TEST_F(SafetensorsSave, GpuTensorsGoThroughPinnedStagingAndMakeTheSameFile) {
  testing::fake_cuda_script().copy_mode = testing::FakeCopyMode::deferred;  // copies land only when synchronised
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, /*device=*/true, /*scale=*/9000);  // about 38 MiB: two windows
  const std::string path = (dir_ / "gpu.safetensors").string();
  auto stats = detail::save_with(path, t, options(), seams());
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_EQ(testing::read_whole_file(path), expected_file(t, keep, options()));
  EXPECT_TRUE(stats->staging_pinned);
  std::uint64_t device_bytes = 0;
  for (const auto& m : keep) device_bytes += m->host.size();
  EXPECT_EQ(stats->device_bytes, device_bytes);
  EXPECT_EQ(testing::fake_cuda_counters().dtoh_bytes, device_bytes) << "every GPU byte was copied exactly once";
  EXPECT_EQ(testing::fake_cuda_counters().dtoh_copies, 0u) << "no synchronous (pageable) copies";
  EXPECT_EQ(stats->requests, 2u);
  EXPECT_THAT(stats->notes, ::testing::Contains(HasSubstr("pinned memory")));
  EXPECT_GT(ferry::pinned_memory_use().pinned_bytes, 0u) << "staging is kept for the next save";
}

// Issue 50: within the smallest pinned budget a save's windows are cut to what it holds (two: 64 MiB), the
// notes say so, the file is the same, and the pinned bytes never went past the budget.
TEST_F(SafetensorsSave, GpuTensorsWithinTheSmallestPinnedBudget) {
  const Config before = default_config().value();
  Config budgeted = before;
  set_default_config(budgeted.set_pinned_budget(64 << 20));
  ferry::detail::reset_peak_pinned_bytes();
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, /*device=*/true, /*scale=*/24000);  // about 100 MiB: four windows by default
  const std::string path = (dir_ / "gpu.safetensors").string();
  auto stats = detail::save_with(path, t, options(), seams());
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_EQ(testing::read_whole_file(path), expected_file(t, keep, options()));
  EXPECT_TRUE(stats->staging_pinned);
  EXPECT_EQ(stats->staging_bytes, 2 * kSaveWindowBytes);
  EXPECT_THAT(stats->notes, ::testing::Contains(HasSubstr("half of pinned_budget")));
  EXPECT_LE(ferry::pinned_memory_use().peak_bytes, 64u << 20);
  set_default_config(before);
}

TEST_F(SafetensorsSave, ReplacesAnExistingFileAndWritesThroughSymlinks) {
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, false);
  const fs::path real = dir_ / "real.safetensors";
  std::ofstream(real) << "old";
  fs::permissions(real, fs::perms(0640));
  fs::create_symlink("real.safetensors", dir_ / "link.safetensors");
  auto stats = detail::save_with((dir_ / "link.safetensors").string(), t, options(), seams());
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_TRUE(stats->replaced);
  EXPECT_EQ(stats->target, fs::canonical(real).string());
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.safetensors")) << "the link stays";
  EXPECT_EQ(testing::read_whole_file(real), expected_file(t, keep, options()));
  EXPECT_EQ(fs::status(real).permissions() & fs::perms::all, fs::perms(0640)) << "the mode is kept";
}

TEST_F(SafetensorsSave, RefusesDestinationsFerryDoesNotReplace) {
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, false);
  fs::create_directory(dir_ / "adir");
  EXPECT_THAT(detail::save_with((dir_ / "adir").string(), t, options(), seams()), StatusIs(ErrorCode::is_a_directory));
  EXPECT_THAT(detail::save_with((dir_ / "missing" / "m.safetensors").string(), t, options(), seams()),
              StatusIs(ErrorCode::not_found, HasSubstr("missing")));
  fs::create_symlink("nowhere", dir_ / "dangling");
  EXPECT_THAT(detail::save_with((dir_ / "dangling").string(), t, options(), seams()),
              StatusIs(ErrorCode::not_found, HasSubstr("does not exist")));
}

TEST_F(SafetensorsSave, RefusesOverlappingTensorsUnlessAskedNotTo) {
  std::vector<std::uint8_t> bytes(64);
  std::vector<SaveTensor> t = {{"whole", Dtype::u8, {64}, bytes.data()}, {"part", Dtype::u8, {16}, bytes.data() + 8},
                               {"apart", Dtype::u8, {0}, bytes.data() + 8}};
  const std::string path = (dir_ / "o.safetensors").string();
  EXPECT_THAT(detail::save_with(path, t, options(), seams()),
              StatusIs(ErrorCode::invalid_argument,
                       HasSubstr("tensors \"whole\" and \"part\" share memory")));
  EXPECT_FALSE(fs::exists(path));
  SaveOptions o = options();
  o.refuse_overlapping = false;  // safetensors.numpy's rule: each saved in full
  ASSERT_TRUE(detail::save_with(path, t, o, seams()).ok());
  // Disjoint parts of one buffer are not shared memory.
  std::vector<SaveTensor> halves = {{"lo", Dtype::u8, {32}, bytes.data()}, {"hi", Dtype::u8, {32}, bytes.data() + 32}};
  EXPECT_TRUE(detail::save_with(path, halves, options(), seams()).ok());
}

TEST_F(SafetensorsSave, ATensorWithoutDataIsRefusedByName) {
  std::vector<SaveTensor> t = {{"w", Dtype::f32, {4}, nullptr}};
  EXPECT_THAT(detail::save_with((dir_ / "n.safetensors").string(), t, options(), seams()),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("tensor \"w\" has no data for its 16 bytes")));
}

TEST_F(SafetensorsSave, ProgressIsReportedAndCanCancel) {
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, false, 9000);
  const std::string path = (dir_ / "p.safetensors").string();
  std::ofstream(path) << "old";
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  SaveOptions o = options();
  o.max_staging_bytes = 1;  // two windows
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    calls.emplace_back(done, total);
    return calls.size() < 2;
  };
  o.progress_interval = std::chrono::milliseconds(0);
  EXPECT_THAT(detail::save_with(path, t, o, seams()),
              StatusIs(ErrorCode::cancelled, HasSubstr("is as it was")));
  EXPECT_EQ(testing::read_whole_file(path), (std::vector<std::uint8_t>{'o', 'l', 'd'}));
  EXPECT_THAT(listing(), ElementsAre("p.safetensors"));
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls.front().first, 0u);
}

// Holds every pwrite of the save's File until opened (a ScriptedSyscalls hook).
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(m_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST_F(SafetensorsSave, BackgroundSnapshotEndsBeforeTheWritesAndTheFileHoldsTheSnapshot) {
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, /*device=*/true, 9000);
  const auto expected = expected_file(t, keep, options());
  Gate gate;
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pwrite).runs_first([&] { gate.wait(); }));
  const std::string path = (dir_ / "bg.safetensors").string();
  auto handle = detail::start_save_with(path, t, options(), seams(&sys));  // staging: the whole file
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();
  ASSERT_TRUE(handle->snapshot().ok());
  EXPECT_FALSE(handle->done()) << "no write has been let through yet";
  for (auto& m : keep) std::memset(m->device, 0xEE, m->host.size());  // the caller changes its tensors
  gate.open();
  auto stats = handle->result();
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_EQ(testing::read_whole_file(path), expected) << "the file holds the tensors as they were at the snapshot";
  EXPECT_LE(stats->snapshot_seconds, stats->seconds);
  EXPECT_EQ(stats->snapshot_wait_seconds, 0.0);
  EXPECT_EQ(handle->bytes_written(), stats->file_bytes);
}

TEST_F(SafetensorsSave, BackgroundSnapshotWaitsForWritesWhenStagingIsSmallAndSaysSo) {
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, true, 20000);  // about 84 MiB: three windows, two of staging
  Gate gate;
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pwrite).runs_first([&] { gate.wait(); }));
  SaveOptions o = options();
  o.max_staging_bytes = 2 * kSaveWindowBytes;
  auto handle = detail::start_save_with((dir_ / "small.safetensors").string(), t, o, seams(&sys));
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();
  // Both staging windows are filled (all but the header's bytes copied from the device) before the filler
  // waits for a write; from then on it can only wait, so the wait lasts at least the sleep below.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (testing::fake_cuda_counters().dtoh_bytes < 2 * kSaveWindowBytes - (1 << 20) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(testing::fake_cuda_counters().dtoh_bytes, 2 * kSaveWindowBytes - (1 << 20)) << "the two windows were never filled";
  EXPECT_FALSE(handle->wait_snapshot_for(std::chrono::milliseconds(200))) << "the third window needs a written one";
  gate.open();
  ASSERT_TRUE(handle->snapshot().ok());
  auto stats = handle->result();
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_GT(stats->snapshot_wait_seconds, 0.1);
  EXPECT_EQ(stats->staging_bytes, 2 * kSaveWindowBytes);
  EXPECT_THAT(stats->notes, ::testing::Contains(HasSubstr("the snapshot waited")));
}

TEST_F(SafetensorsSave, BackgroundErrorsComeThroughTheHandleAndLeaveTheTarget) {
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, false, 9000);
  const std::string path = (dir_ / "e.safetensors").string();
  std::ofstream(path) << "old";
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pwrite).covering(kSaveWindowBytes + 4096).fail(ENOSPC));
  auto handle = detail::start_save_with(path, t, options(), seams(&sys));
  ASSERT_TRUE(handle.ok());
  EXPECT_TRUE(handle->snapshot().ok()) << "the staging held everything: the tensors were free before the error";
  EXPECT_THAT(handle->result(), StatusIs(ErrorCode::no_space, HasSubstr("e.safetensors")));
  EXPECT_THAT(handle->result(), StatusIs(ErrorCode::no_space)) << "result() may be asked again";
  EXPECT_EQ(testing::read_whole_file(path), (std::vector<std::uint8_t>{'o', 'l', 'd'}));
  EXPECT_THAT(listing(), ElementsAre("e.safetensors"));
}

TEST_F(SafetensorsSave, ABackgroundSaveCancelledLeavesTheTargetAsItWas) {
  std::vector<std::unique_ptr<Memory>> keep;
  auto t = tensors(keep, false, 9000);
  const std::string path = (dir_ / "c.safetensors").string();
  std::ofstream(path) << "old";
  Gate gate;
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pwrite).runs_first([&] { gate.wait(); }));
  auto handle = detail::start_save_with(path, t, options(), seams(&sys));
  ASSERT_TRUE(handle.ok());
  ASSERT_TRUE(handle->snapshot().ok());
  handle->cancel();
  gate.open();
  EXPECT_THAT(handle->result(), StatusIs(ErrorCode::cancelled, HasSubstr("is as it was")));
  EXPECT_EQ(testing::read_whole_file(path), (std::vector<std::uint8_t>{'o', 'l', 'd'}));
  EXPECT_THAT(listing(), ElementsAre("c.safetensors"));
}

TEST_F(SafetensorsSave, RefusalsComeFromStartSaveBeforeAnyThread) {
  std::vector<SaveTensor> t = {{"__metadata__", Dtype::u8, {1}, "x"}};
  EXPECT_THAT(detail::start_save_with((dir_ / "r.safetensors").string(), t, options(), seams()),
              StatusIs(ErrorCode::invalid_argument, HasSubstr("Could not save")));
  std::vector<SaveTensor> ok = {{"x", Dtype::u8, {1}, "x"}};
  EXPECT_THAT(detail::start_save_with(dir_.string(), ok, options(), seams()), StatusIs(ErrorCode::is_a_directory));
}

// ---- shards ----

TEST(SafetensorsShardPlan, SplitsAsHuggingfaceHub) {
  auto plan = [](std::vector<std::uint64_t> sizes, std::uint64_t max) { return plan_shards(sizes, max); };
  using Shards = std::vector<std::vector<std::size_t>>;
  EXPECT_EQ(plan({1, 2, 3}, 10), (Shards{{0, 1, 2}}));
  EXPECT_EQ(plan({4, 4, 4}, 8), (Shards{{0, 1}, {2}}));  // a shard may reach the limit exactly
  EXPECT_EQ(plan({1, 20, 1, 9}, 10), (Shards{{1}, {0, 2}, {3}}));  // the large one first, on its own
  EXPECT_EQ(plan({}, 10), Shards{});
  EXPECT_EQ(plan({0, 0}, 0), (Shards{{0, 1}}));
}

// The save id a sharded save wrote: in the index `text` (or at the index's path).
std::string save_id_in(std::string text_or_path) {
  if (text_or_path.find('{') == std::string::npos) {
    std::ifstream in(text_or_path);
    text_or_path.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  return nlohmann::json::parse(text_or_path)["metadata"].value(kSaveIdKey, std::string());
}

std::string as_text(const std::vector<std::uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

TEST_F(SafetensorsSave, ShardedSavesWriteHuggingFaceNamesAndTheIndexLast) {
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<SaveTensor> t;
  for (int i = 0; i < 5; ++i) {
    data.push_back(testing::pattern(i * 1000, 4000));
    t.push_back({"layers." + std::to_string(i) + ".w", Dtype::f32, {1000}, data.back().data()});
  }
  t.push_back({"tied", Dtype::f32, {1000}, data[0].data()});  // the same memory as layers.0.w
  ShardedSaveOptions o;
  o.save = options();
  o.max_shard_bytes = 8000;
  auto stats = detail::save_sharded_with(dir_.string(), t, o, seams());
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_THAT(listing(), ElementsAre("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                     "model-00003-of-00003.safetensors", "model.safetensors.index.json"));
  EXPECT_EQ(stats->total_size, 20000u);
  EXPECT_THAT(stats->aliases, ElementsAre(std::make_pair(std::string("tied"), std::string("layers.0.w"))));
  std::ifstream in(dir_ / "model.safetensors.index.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // transformers' layout (json.dumps(indent=2, sort_keys=True)), with what ties the set together: the save's id
  // (in every shard's __metadata__ too) and each shard's size.
  const std::string id = save_id_in(text);
  ASSERT_EQ(id.size(), 16u) << text;
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                   "model-00003-of-00003.safetensors"}) {
    auto c = Checkpoint::open((dir_ / shard).string());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->shard_facts()[0].metadata.at(kSaveIdKey), id) << shard;
  }
  EXPECT_EQ(text, R"({
  "metadata": {
    "ferry.save_id": ")" + id + R"(",
    "ferry.shard_bytes": {
      "model-00001-of-00003.safetensors": 8200,
      "model-00002-of-00003.safetensors": 8200,
      "model-00003-of-00003.safetensors": 4136
    },
    "total_size": 20000
  },
  "weight_map": {
    "layers.0.w": "model-00001-of-00003.safetensors",
    "layers.1.w": "model-00001-of-00003.safetensors",
    "layers.2.w": "model-00002-of-00003.safetensors",
    "layers.3.w": "model-00002-of-00003.safetensors",
    "layers.4.w": "model-00003-of-00003.safetensors"
  }
}
)");
  auto ckpt = Checkpoint::open(dir_.string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ(ckpt->tensors().size(), 5u);
  EXPECT_EQ(ckpt->files().size(), 3u);
}

// Found on the H200: a sharded save of CUDA tensors (an nn.Linear's state_dict) crashed.
TEST_F(SafetensorsSave, ShardedSavesOfGpuTensorsMakeTheSameFilesAsOfHostTensors) {
  std::vector<std::unique_ptr<Memory>> keep_gpu, keep_host;
  auto gpu = tensors(keep_gpu, /*device=*/true, /*scale=*/40);
  auto host = tensors(keep_host, /*device=*/false, /*scale=*/40);
  ShardedSaveOptions o;
  o.save = options();
  o.max_shard_bytes = 10000;
  auto a = detail::save_sharded_with((dir_ / "gpu").string(), gpu, o, seams());
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = detail::save_sharded_with((dir_ / "host").string(), host, o, seams());
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  ASSERT_EQ(a->files.size(), b->files.size());
  ASSERT_GT(a->files.size(), 1u);
  // The same bytes, but for each save's own id (16 hex digits in every shard's header).
  const std::string id_a = save_id_in(a->index), id_b = save_id_in(b->index);
  ASSERT_EQ(id_a.size(), 16u);
  for (std::size_t i = 0; i < a->files.size(); ++i) {
    std::string gpu_file = as_text(testing::read_whole_file(a->files[i]));
    const std::size_t at = gpu_file.find(id_a);
    ASSERT_NE(at, std::string::npos) << a->files[i];
    gpu_file.replace(at, id_a.size(), id_b);
    EXPECT_EQ(gpu_file, as_text(testing::read_whole_file(b->files[i]))) << a->files[i];
  }
}

TEST_F(SafetensorsSave, ShardedSavesRefuseOrRemoveStaleFiles) {
  std::vector<std::uint8_t> data(4000);
  std::vector<SaveTensor> t = {{"a", Dtype::u8, {4000}, data.data()}};
  std::ofstream(dir_ / "model-00001-of-00002.safetensors") << "old";
  std::ofstream(dir_ / "model.safetensors.index.json") << "{}";
  std::ofstream(dir_ / "notes.txt") << "mine";
  // Near misses of the shard pattern are not ours: they stay.
  for (const char* other : {"model-0001-of-00002.safetensors", "model-00001-of-00002.safetensors.bak",
                            "modelx-00001-of-00002.safetensors", "model-0000a-of-00002.safetensors",
                            "model-00001-0f-00002.safetensors", "model-00001-of-000020safetensors"}) {
    std::ofstream(dir_ / other) << "theirs";
  }
  const std::vector<std::string> theirs = {"model-00001-0f-00002.safetensors", "model-00001-of-00002.safetensors.bak",
                                           "model-00001-of-000020safetensors", "model-0000a-of-00002.safetensors",
                                           "model-0001-of-00002.safetensors", "modelx-00001-of-00002.safetensors"};
  ShardedSaveOptions o;
  o.save = options();
  EXPECT_THAT(detail::save_sharded_with(dir_.string(), t, o, seams()),
              StatusIs(ErrorCode::already_exists,
                       HasSubstr("\"model-00001-of-00002.safetensors\", \"model.safetensors.index.json\"")));
  std::vector<std::string> before = theirs;
  before.push_back("model-00001-of-00002.safetensors");
  before.push_back("model.safetensors.index.json");
  before.push_back("notes.txt");
  std::sort(before.begin(), before.end());
  EXPECT_EQ(listing(), before) << "nothing written, nothing removed";
  o.remove_stale = true;
  auto stats = detail::save_sharded_with(dir_.string(), t, o, seams());
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_TRUE(stats->index.empty()) << "one shard: no index, as save_pretrained";
  std::vector<std::string> after = theirs;
  after.push_back("model.safetensors");
  after.push_back("notes.txt");
  std::sort(after.begin(), after.end());
  EXPECT_EQ(listing(), after);
  EXPECT_EQ(stats->removed.size(), 2u);
}

TEST_F(SafetensorsSave, AShardPrefixIsMatchedLiterallyNotAsAPattern) {
  std::vector<std::uint8_t> data(4000);
  std::vector<SaveTensor> t = {{"a", Dtype::u8, {4000}, data.data()}};
  std::ofstream(dir_ / "m.v+1-00002-of-00003.safetensors") << "old";
  std::ofstream(dir_ / "mxv+1-00002-of-00003.safetensors") << "theirs";
  std::ofstream(dir_ / "m.vv1-00002-of-00003.safetensors") << "theirs";
  ShardedSaveOptions o;
  o.save = options();
  o.prefix = "m.v+1";
  EXPECT_THAT(detail::save_sharded_with(dir_.string(), t, o, seams()),
              StatusIs(ErrorCode::already_exists, HasSubstr("holds \"m.v+1-00002-of-00003.safetensors\" from")));
}

}  // namespace
}  // namespace ferry::safetensors
