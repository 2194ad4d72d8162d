// Issue 9 on the real GPU: the five failures a new user met, the stress run, and the same on a second
// GPU while the first is current. Skips with the driver's own reason where CUDA is unusable.
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include "ferry/ferry.hpp"
#include "backends/staging_pool.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/cufile/cufile_api.hpp"
#include "platform/cufile/cufile_driver.hpp"
#include "platform/cufile/cufile_env.hpp"
#include "support/device_memory.hpp"
#include "support/status_matchers.hpp"
#include "support/stress.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace ferry {
namespace {

using ::testing::HasSubstr;
using detail::CudaApi;
using testing::DeviceMemory;

#define REQUIRE_GPU()                                                                     \
  const CudaApi* api = detail::process_cuda_api();                                        \
  if (api == nullptr) GTEST_SKIP() << "no usable GPU: " << detail::process_cuda_status().to_string()

int device_count(const CudaApi& api) {
  int n = 0;
  return api.cuDeviceGetCount(&n) == detail::CUDA_SUCCESS ? n : 0;
}

Config config(CompatMode compat) {
  Config c;
  c.set_compat_mode(compat);
  return c;
}

// Failure 1: a 1 MiB read 1000 bytes before the end, into memory filled with 7s, changed the bytes
// after the first 1000 (compat off). Every policy, and a few other places near the end.
TEST(Issue9Gpu, ReadAtTheEndOfTheFileChangesNoBytePastTheCount) {
  REQUIRE_GPU();
  auto dir = testing::test_dir();
  const std::uint64_t size = (3 << 20) + 123;
  auto path = testing::write_pattern_file(dir / "f.bin", size);
  for (CompatMode compat : {CompatMode::off, CompatMode::automatic, CompatMode::on}) {
    auto file = File::open(path, "r", config(compat));
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    for (std::uint64_t back : {std::uint64_t{1000}, std::uint64_t{1}, std::uint64_t{4096}, std::uint64_t{5000},
                               std::uint64_t{(1 << 20) + 7}}) {
      const std::uint64_t want_bytes = std::min<std::uint64_t>(back, 1 << 20);
      DeviceMemory dev(*api, 1 << 20, 0, 7);
      auto r = file->pread(dev.get(), 1 << 20, size - back).get();
      ASSERT_TRUE(r.ok()) << compat_mode_name(compat) << ": " << r.status().to_string();
      ASSERT_EQ(r->bytes, want_bytes);
      auto got = dev.to_host();
      auto want = testing::pattern(size - back, want_bytes);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want_bytes)) << compat_mode_name(compat) << " back " << back;
      for (std::uint64_t i = want_bytes; i < got.size(); ++i) {
        ASSERT_EQ(got[i], 7) << compat_mode_name(compat) << ", " << back << " bytes before the end: byte " << i
                             << " past the count was changed; " << r->report.summary();
      }
    }
  }
}

// Failure 2: 64 reads of 1 MiB in flight on one File (compat off) failed with cuFile error 5028. Also:
// the same file closed and opened again (its descriptor number reused), and two Files on one path.
TEST(Issue9Gpu, SixtyFourReadsInFlightOnOneFileWithCuFile) {
  REQUIRE_GPU();
  auto dir = testing::test_dir();
  const std::uint64_t piece = 1 << 20, count = 64;
  auto path = testing::write_pattern_file(dir / "f.bin", piece * count);
  auto want = testing::pattern(0, piece * count);
  for (int round = 0; round < 3; ++round) {
    auto file = File::open(path, "r", config(CompatMode::off));
    ASSERT_TRUE(file.ok());
    DeviceMemory dev(*api, piece * count);
    std::vector<Future> futures;
    for (std::uint64_t i = 0; i < count; ++i) {
      futures.push_back(file->pread(static_cast<char*>(dev.get()) + i * piece, piece, i * piece));
    }
    for (auto& f : futures) {
      auto r = f.get();
      ASSERT_TRUE(r.ok()) << "round " << round << ": " << r.status().to_string();
      ASSERT_EQ(r->bytes, piece);
    }
    ASSERT_EQ(dev.to_host(), want) << "round " << round;
    ASSERT_TRUE(file->close().ok());
  }
  // Written through cuFile, closed, then read through cuFile: the descriptor number comes back.
  {
    auto out = File::open((dir / "w.bin").string(), "w", config(CompatMode::off));
    ASSERT_TRUE(out.ok());
    DeviceMemory src(*api, piece);
    src.from_host(testing::pattern(0, piece));
    ASSERT_TRUE(out->pwrite(src.get(), piece, 0).get().ok());
    ASSERT_TRUE(out->close().ok());
    auto in = File::open((dir / "w.bin").string(), "r", config(CompatMode::off));
    ASSERT_TRUE(in.ok());
    DeviceMemory dst(*api, piece);
    auto r = in->pread(dst.get(), piece, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(dst.to_host(), testing::pattern(0, piece));
  }
  // Two Files open on one path at once, both through cuFile.
  auto a = File::open(path, "r", config(CompatMode::off));
  auto b = File::open(path, "r", config(CompatMode::off));
  ASSERT_TRUE(a.ok() && b.ok());
  DeviceMemory da(*api, piece), db(*api, piece);
  auto ra = a->pread(da.get(), piece, 0).get();
  auto rb = b->pread(db.get(), piece, piece).get();
  ASSERT_TRUE(ra.ok()) << ra.status().to_string();
  ASSERT_TRUE(rb.ok()) << "a second File on the same path: " << rb.status().to_string();
  EXPECT_EQ(db.to_host(), testing::pattern(piece, piece));
}

// Failure 3: threads with no current CUDA context (as a fresh Python thread is) could not read.
TEST(Issue9Gpu, ThreadsWithoutAContextReadAndAreLeftWithoutOne) {
  REQUIRE_GPU();
  auto dir = testing::test_dir();
  std::atomic<int> bad{0};
  std::vector<std::string> messages(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      const CompatMode compat = t % 3 == 0 ? CompatMode::on : t % 3 == 1 ? CompatMode::automatic : CompatMode::off;
      const std::uint64_t size = (8 << 20) + 77 * t;
      auto path = testing::write_pattern_file(dir / ("t" + std::to_string(t)), size);
      DeviceMemory dev(*api, size);  // leaves this thread without a context, as it found it
      detail::CUcontext before = reinterpret_cast<detail::CUcontext>(1);
      api->cuCtxGetCurrent(&before);
      auto file = File::open(path, "r", config(compat));
      auto r = file->pread(dev.get(), size, 0).get();
      detail::CUcontext after = reinterpret_cast<detail::CUcontext>(1);
      api->cuCtxGetCurrent(&after);
      if (!r.ok()) {
        messages[t] = r.status().to_string();
        ++bad;
      } else if (dev.to_host() != testing::pattern(0, size)) {
        messages[t] = "wrong bytes";
        ++bad;
      } else if (before != nullptr || after != nullptr) {
        messages[t] = "a context was left current on the caller's thread";
        ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& m : messages) EXPECT_EQ(m, "");
  EXPECT_EQ(bad.load(), 0);
}

// Failure 4: a device pointer is checked against its allocation before any I/O.
TEST(Issue9Gpu, BuffersOutsideTheirAllocationAreRefusedBeforeAnyIo) {
  REQUIRE_GPU();
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "f.bin", 4 << 20);
  for (CompatMode compat : {CompatMode::on, CompatMode::off}) {
    auto file = File::open(path, "r", config(compat));
    DeviceMemory dev(*api, 1 << 20, 0, 7);
    auto r = file->pread(static_cast<char*>(dev.get()) + 4096, 1 << 20, 0).get();
    ASSERT_THAT(r, StatusIs(ErrorCode::invalid_argument));
    EXPECT_THAT(r.status().message(), HasSubstr("does not fit in its allocation"));
    auto got = dev.to_host();
    EXPECT_EQ(got, std::vector<std::uint8_t>(got.size(), 7)) << "bytes changed by a refused read";
    // Freed memory: the driver no longer knows the pointer. It is not device memory any more, and the
    // read must fail rather than write somewhere.
    DeviceMemory gone(*api, 1 << 20);
    void* dangling = gone.get();
    gone.free_now();
    auto g = file->pread(dangling, 1 << 20, 0).get();
    EXPECT_FALSE(g.ok()) << "a read into freed device memory succeeded: " << g->report.summary();
  }
}

// Failure 5: CUFILE_FORCE_COMPAT_MODE is read one way. Each spelling is given to a fresh process (cuFile
// reads its environment once, when its driver opens), which asks cuFile what it made of it; Ferry's
// parser, used where cuFile cannot be asked, must agree.
TEST(Issue9Gpu, ForceCompatModeSpellingsReadAsCuFileReadsThem) {
  REQUIRE_GPU();
  if (const char* child = std::getenv("FERRY_TEST_FORCE_COMPAT_CHILD")) {
    const detail::CuFileApi* cufile = detail::process_cufile_api();
    if (cufile == nullptr || cufile->cuFileGetParameterBool == nullptr) {
      std::ofstream(child) << "unavailable";
      return;
    }
    // cuFile takes its environment in when the driver opens.
    auto driver = detail::CuFileDriver::open(*cufile);
    if (!driver.ok()) {
      std::ofstream(child) << "no-driver";
      return;
    }
    bool value = false;
    auto e = cufile->cuFileGetParameterBool(detail::CUFILE_PARAM_FORCE_COMPAT_MODE, &value);
    std::ofstream(child) << (e.err == detail::CU_FILE_SUCCESS ? (value ? "true" : "false") : "error");
    return;
  }
  const detail::CuFileApi* cufile = detail::process_cufile_api();
  if (cufile == nullptr) GTEST_SKIP() << detail::process_cufile_status().to_string();
  if (cufile->cuFileGetParameterBool == nullptr) GTEST_SKIP() << "this libcufile has no cuFileGetParameterBool";
  auto dir = testing::test_dir();
  const char* spellings[] = {"true", "false", "TRUE", "True", "FALSE", "1", "0", "yes", "no", "on", "off", "YES",
                             " true", "2", "", "enabled"};
  std::ostringstream table;
  int disagreements = 0;
  for (const char* spelling : spellings) {
    auto answer = dir / "answer.txt";
    std::filesystem::remove(answer);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("CUFILE_FORCE_COMPAT_MODE", spelling, 1);
      ::setenv("FERRY_TEST_FORCE_COMPAT_CHILD", answer.c_str(), 1);
      ::execl("/proc/self/exe", "ferry_gpu_tests", "--gtest_filter=Issue9Gpu.ForceCompatModeSpellingsReadAsCuFileReadsThem",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::ifstream in(answer);
    std::string cufile_says;
    in >> cufile_says;
    auto ours = detail::parse_cufile_bool(spelling);
    std::string we_say = ours ? (*ours ? "true" : "false") : "ignored";
    // cuFile keeps its default (false) for what it does not read; Ferry's "ignored" means the same.
    const bool agree = cufile_says == we_say || (we_say == "ignored" && cufile_says == "false");
    disagreements += agree ? 0 : 1;
    table << "  \"" << spelling << "\": cuFile " << cufile_says << ", Ferry " << we_say << (agree ? "" : "  <-- differs")
          << "\n";
  }
  std::cout << "CUFILE_FORCE_COMPAT_MODE as cuFile and Ferry read it:\n" << table.str();
  EXPECT_EQ(disagreements, 0) << table.str();
}

// The stress run on the real GPU(s): at least 20,000 requests within three minutes, every byte right.
TEST(Issue9Gpu, StressEveryByteRightUnderConcurrency) {
  REQUIRE_GPU();
  testing::StressOptions o;
  o.seed = std::getenv("FERRY_STRESS_SEED") ? std::strtoull(std::getenv("FERRY_STRESS_SEED"), nullptr, 10) : 9;
  o.threads = 16;
  o.files = 3;
  o.region_bytes = (2 << 20) + 4099;
  o.task_size = 256 << 10;
  o.ferry_threads = 8;
  o.max_requests = std::getenv("FERRY_STRESS_REQUESTS") ? std::strtoull(std::getenv("FERRY_STRESS_REQUESTS"), nullptr, 10)
                                                         : 20000;
  o.max_time = std::chrono::minutes(3);
  o.devices.clear();
  for (int d = 0; d < device_count(*api); ++d) o.devices.push_back(d);
  o.dir = testing::test_dir();
  auto out = testing::run_stress(o);
  std::cout << "stress on " << o.devices.size() << " GPU(s), seed " << o.seed << ": " << out.summary() << "\n";
  EXPECT_TRUE(out.ok()) << out.summary();
  EXPECT_GE(out.requests, o.max_requests) << "fewer than " << o.max_requests << " requests in three minutes";
}

// Issue 50: the same, a third of its reads made as batches, within the smallest pinned budget (8 MiB bounce
// buffers, half of the budget held by others all along: the run's workers share room for two kits): every
// byte right, no hang, and the pinned bytes never went past the budget.
TEST(Issue9Gpu, StressWithinTheSmallestPinnedBudget) {
  REQUIRE_GPU();
  const Config before = default_config().value();
  Config budgeted = before;
  set_default_config(budgeted.set_pinned_budget(64 << 20));
  detail::process_staging_pool().clear();
  detail::reset_peak_pinned_bytes();
  const std::uint64_t waits_before = ferry::pinned_memory_use().waits;
  // Others hold half of it all along: two workers' kits are left for the run's sixteen threads.
  ASSERT_TRUE(detail::make_current(*api, 0).ok());
  const unsigned others[] = {2, 2, 2, 2};
  auto held = detail::process_staging_pool().acquire({api, 0, 4 << 20}, others);
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  testing::StressOptions o;
  o.seed = std::getenv("FERRY_STRESS_SEED") ? std::strtoull(std::getenv("FERRY_STRESS_SEED"), nullptr, 10) : 50;
  o.threads = 16;
  o.files = 3;
  o.region_bytes = (2 << 20) + 4099;
  o.task_size = 256 << 10;
  o.bounce_buffer_size = 8 << 20;
  o.batch_percent = 30;
  o.ferry_threads = 8;
  o.max_requests = 5000;
  o.max_time = std::chrono::minutes(2);
  o.devices.clear();
  for (int d = 0; d < device_count(*api); ++d) o.devices.push_back(d);
  o.dir = testing::test_dir();
  auto out = testing::run_stress(o);
  for (auto& kit : *held) detail::process_staging_pool().release(std::move(kit));
  std::cout << "stress within 64 MiB of pinned memory, seed " << o.seed << ": " << out.summary() << "; peak "
            << ferry::pinned_memory_use().peak_bytes << " bytes, " << ferry::pinned_memory_use().waits - waits_before
            << " waits for room\n";
  EXPECT_TRUE(out.ok()) << out.summary();
  EXPECT_GE(out.requests, o.max_requests) << "fewer than " << o.max_requests << " requests in three minutes";
  EXPECT_GT(out.batches, 0u);
  EXPECT_LE(ferry::pinned_memory_use().peak_bytes, 64u << 20);
  EXPECT_GT(ferry::pinned_memory_use().waits, waits_before) << "the budget never held anything back: the test proves nothing";
  set_default_config(before);
}

// Two GPUs: reads into and writes from GPU 1 while GPU 0 is current, one thread per GPU, every policy.
TEST(Issue9Gpu, SecondGpuWhileTheFirstIsCurrent) {
  REQUIRE_GPU();
  if (device_count(*api) < 2) GTEST_SKIP() << "one GPU here: the two-GPU case needs the nvidia-h200-x2 machine";
  auto dir = testing::test_dir();
  const std::uint64_t size = (32 << 20) + 4097;
  auto path = testing::write_pattern_file(dir / "f.bin", size);
  auto want = testing::pattern(0, size);
  std::vector<std::string> failures(2);
  std::vector<std::thread> threads;
  for (int gpu = 0; gpu < 2; ++gpu) {
    threads.emplace_back([&, gpu] {
      for (CompatMode compat : {CompatMode::on, CompatMode::automatic, CompatMode::off}) {
        DeviceMemory dev(*api, size, gpu);
        ASSERT_TRUE(detail::make_current(*api, 0).ok());  // GPU 0 current, whatever GPU the buffer is on
        auto file = File::open(path, "r", config(compat));
        auto r = file->pread(dev.get(), size, 0).get();
        if (!r.ok()) failures[gpu] += std::string(compat_mode_name(compat)) + " read: " + r.status().to_string() + "; ";
        else if (dev.to_host() != want) failures[gpu] += std::string(compat_mode_name(compat)) + " read: wrong bytes; ";
        auto out_path = dir / ("out-" + std::to_string(gpu) + compat_mode_name(compat));
        auto out = File::open(out_path.string(), "w", config(compat));
        auto w = out->pwrite(dev.get(), size, 0).get();
        (void)out->close();
        if (!w.ok()) failures[gpu] += std::string(compat_mode_name(compat)) + " write: " + w.status().to_string() + "; ";
        else if (testing::read_whole_file(out_path) != want) failures[gpu] += "write: wrong bytes; ";
        detail::CUcontext current = nullptr;
        api->cuCtxGetCurrent(&current);
        if (current != *detail::primary_context(*api, 0)) failures[gpu] += "the current context was changed; ";
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

}  // namespace
}  // namespace ferry
