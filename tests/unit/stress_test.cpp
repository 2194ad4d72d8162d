// The concurrency stress run (tests/support/stress.hpp) on the fake GPU platform: threads without a
// context and threads with another GPU's context current, three Files per path (compat on, auto, off),
// host and device buffers, reads and writes; every byte checked. Bounded for CI; FERRY_STRESS_REQUESTS
// and FERRY_STRESS_SEED run it longer or replay a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backends/staging_pool.hpp"
#include "ferry/config.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/stress.hpp"
#include "support/test_files.hpp"

namespace ferry {
namespace {

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Two fake GPUs, every fake and pool fresh; the default configuration comes back after each test.
class Stress : public ::testing::Test {
 protected:
  void SetUp() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    testing::fake_cuda_script().device_count = 2;
  }
  void TearDown() override {
    set_default_config(default_before_);
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }
  // Six threads on both fake GPUs, four Ferry threads per File; FERRY_STRESS_* override the seed and count.
  static testing::StressOptions options(std::uint64_t seed) {
    testing::StressOptions o;
    o.seed = env_or("FERRY_STRESS_SEED", seed);
    o.max_requests = env_or("FERRY_STRESS_REQUESTS", 3000);
    o.threads = 6;
    o.ferry_threads = 4;
    o.devices = {0, 1};
    o.gpu = &testing::fake_gpu_platform();
    o.dir = testing::test_dir();
    return o;
  }
  const Config default_before_ = default_config().value();
};

TEST_F(Stress, EveryByteRightWithManyThreadsFilesPoliciesAndTwoFakeGpus) {
  testing::StressOptions o = options(20261130);
  o.region_bytes = (256 << 10) + 4099;
  o.task_size = 16 << 10;
  auto out = testing::run_stress(o);
  EXPECT_TRUE(out.ok()) << out.summary();
  EXPECT_GE(out.requests, o.max_requests);
  EXPECT_GT(out.ops_by_route[static_cast<int>(Route::staged)], 0u) << out.summary();
  EXPECT_GT(out.ops_by_route[static_cast<int>(Route::cufile_posix)], 0u) << out.summary();
  EXPECT_GT(out.ops_by_route[static_cast<int>(Route::host)], 0u) << out.summary();
  std::cout << "stress: seed " << o.seed << ": " << out.summary() << "\n";
}

// Issue 50: the same run, a third of its reads made as batches, with the process's pinned staging capped at
// the smallest budget, 48 MiB of it held by others all along: the run's workers (three Files, two GPUs, four
// threads each, 16 MiB a kit) share room for one kit. Every byte is still right, nothing hangs, and the
// pinned bytes never went past the budget.
TEST_F(Stress, EveryByteRightWithinTheSmallestPinnedBudget) {
  Config budgeted = default_before_;
  set_default_config(budgeted.set_pinned_budget(64 << 20));
  detail::reset_peak_pinned_bytes();
  const std::uint64_t waits_before = ferry::pinned_memory_use().waits;
  // Others hold three quarters of it all along: one worker's kit is left for the run, so that its workers
  // meet the budget whatever the machine's timing.
  ASSERT_TRUE(detail::make_current(testing::fake_cuda_api(), 0).ok());
  const unsigned others[] = {2, 2, 2, 2, 2, 2};
  auto held = detail::process_staging_pool().acquire({&testing::fake_cuda_api(), 0, 4 << 20}, others);
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  (void)testing::fake_cuda_api().cuCtxSetCurrent(nullptr);
  testing::StressOptions o = options(20261204);
  o.region_bytes = (1 << 20) + 4099;
  o.task_size = 64 << 10;
  o.bounce_buffer_size = 8 << 20;
  o.batch_percent = 30;
  auto out = testing::run_stress(o);
  EXPECT_TRUE(out.ok()) << out.summary();
  EXPECT_GE(out.requests, o.max_requests);
  EXPECT_GT(out.batches, 0u);
  EXPECT_LE(ferry::pinned_memory_use().peak_bytes, 64u << 20);
  EXPECT_GT(ferry::pinned_memory_use().waits, waits_before) << "the budget never held anything back: the test proves nothing";
  for (auto& kit : *held) detail::process_staging_pool().release(std::move(kit));
  std::cout << "stress within 64 MiB of pinned memory: seed " << o.seed << ": " << out.summary() << "; "
            << ferry::pinned_memory_use().waits - waits_before << " waits for room\n";
}

}  // namespace
}  // namespace ferry
