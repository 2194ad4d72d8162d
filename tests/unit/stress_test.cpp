// The concurrency stress run (tests/support/stress.hpp) on the fake GPU platform: threads without a
// context and threads with another GPU's context current, three Files per path (compat on, auto, off),
// host and device buffers, reads and writes; every byte checked. Bounded for CI; FERRY_STRESS_REQUESTS
// and FERRY_STRESS_SEED run it longer or replay a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backends/staging_pool.hpp"
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

TEST(Stress, EveryByteRightWithManyThreadsFilesPoliciesAndTwoFakeGpus) {
  detail::process_staging_pool().clear();
  testing::reset_fake_cuda();
  testing::reset_fake_cufile();
  testing::fake_cuda_script().device_count = 2;
  testing::StressOptions o;
  o.seed = env_or("FERRY_STRESS_SEED", 20261130);
  o.max_requests = env_or("FERRY_STRESS_REQUESTS", 3000);
  o.threads = 6;
  o.region_bytes = (256 << 10) + 4099;
  o.task_size = 16 << 10;
  o.ferry_threads = 4;
  o.devices = {0, 1};
  o.gpu = &testing::fake_gpu_platform();
  o.dir = testing::test_dir();
  auto out = testing::run_stress(o);
  EXPECT_TRUE(out.ok()) << out.summary();
  EXPECT_GE(out.requests, o.max_requests);
  EXPECT_GT(out.ops_by_route[static_cast<int>(Route::staged)], 0u) << out.summary();
  EXPECT_GT(out.ops_by_route[static_cast<int>(Route::cufile_posix)], 0u) << out.summary();
  EXPECT_GT(out.ops_by_route[static_cast<int>(Route::host)], 0u) << out.summary();
  std::cout << "stress: seed " << o.seed << ": " << out.summary() << "\n";
  detail::process_staging_pool().clear();
  testing::reset_fake_cuda();
  testing::reset_fake_cufile();
}

}  // namespace
}  // namespace ferry
