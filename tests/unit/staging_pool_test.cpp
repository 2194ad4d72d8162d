// StagingPool hands out the kit released last: a small request then meets a stream and buffers that were
// just in use, not the ones idle longest. And it keeps to its budget (issue 50): a kit beyond it waits for
// one to come back or frees idle kits of other shapes, callers are served in turn and get all their kits at
// once, a worker is told "not now" and called back.
#include "backends/staging_pool.hpp"
#include "ferry/config.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "platform/cuda/primary_context.hpp"
#include "support/fake_cuda.hpp"
#include "support/status_matchers.hpp"

namespace ferry {
namespace {

namespace fd = ferry::detail;
namespace ft = ferry::testing;

TEST(StagingPool, TheKitReleasedLastIsTakenFirst) {
  ft::reset_fake_cuda();
  const fd::CudaApi& api = ft::fake_cuda_api();
  ASSERT_TRUE(fd::make_current(api, 0).ok());
  {
    fd::StagingPool pool;
    auto first = pool.acquire({&api, 0, 1 << 20}, 2);
    auto second = pool.acquire({&api, 0, 1 << 20}, 2);
    auto third = pool.acquire({&api, 0, 1 << 20}, 2);
    ASSERT_TRUE(first.ok() && second.ok() && third.ok());
    const fd::CUstream second_stream = (*second)->stream, third_stream = (*third)->stream;
    pool.release(std::move(*first));
    pool.release(std::move(*second));
    pool.release(std::move(*third));
    auto again = pool.acquire({&api, 0, 1 << 20}, 2);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->stream, third_stream) << "not the kit released last";
    auto next = pool.acquire({&api, 0, 1 << 20}, 2);
    ASSERT_TRUE(next.ok());
    EXPECT_EQ((*next)->stream, second_stream);
    auto other_shape = pool.acquire({&api, 0, 2 << 20}, 2);  // only kits of the asked shape are taken
    ASSERT_TRUE(other_shape.ok());
    EXPECT_EQ((*other_shape)->buffer_size, 2u << 20);
    EXPECT_EQ(ft::fake_cuda_counters().streams_created, 4u);
    pool.release(std::move(*again));
    pool.release(std::move(*next));
    pool.release(std::move(*other_shape));
    pool.clear();
  }
  EXPECT_EQ(ft::fake_cuda_counters().streams_created, ft::fake_cuda_counters().streams_destroyed);
  ft::reset_fake_cuda();
}

constexpr std::uint64_t kMiB = 1 << 20;

class Budget : public ::testing::Test {
 protected:
  void SetUp() override {
    fd::process_staging_pool().clear();  // kits of earlier tests would count as pinned bytes here
    ft::reset_fake_cuda();
    ASSERT_TRUE(fd::make_current(api, 0).ok());
    fd::reset_peak_pinned_bytes();
  }
  void TearDown() override {
    EXPECT_EQ(ft::fake_cuda_counters().streams_created, ft::fake_cuda_counters().streams_destroyed);
    ft::reset_fake_cuda();
  }
  // A kit of two 4 MiB buffers: 8 MiB of the budget.
  Result<std::unique_ptr<fd::StagingKit>> kit(fd::StagingPool& pool) { return pool.acquire({&api, 0, 4 * kMiB}, 2); }
  // Whether `f` is still waiting after a while (it should be).
  template <typename F>
  static bool still_waiting(F& f) {
    return f.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout;
  }
  const fd::CudaApi& api = ft::fake_cuda_api();
};

TEST_F(Budget, AKitBeyondTheBudgetWaitsUntilOneComesBack) {
  fd::StagingPool pool(16 * kMiB);
  auto a = kit(pool), b = kit(pool);
  ASSERT_TRUE(a.ok() && b.ok());
  std::uint64_t waited = 0;
  auto third = std::async(std::launch::async, [&] {
    EXPECT_TRUE(fd::make_current(api, 0).ok());
    const unsigned two = 2;
    return pool.acquire({&api, 0, 4 * kMiB}, std::span<const unsigned>(&two, 1), &waited);
  });
  EXPECT_TRUE(still_waiting(third)) << "a third kit was made beyond the budget";
  const fd::CUstream a_stream = (*a)->stream;
  pool.release(std::move(*a));
  auto got = third.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->front()->stream, a_stream) << "the kit given back, not a new one";
  EXPECT_GE(waited, 90'000'000u) << "the wait is reported";
  EXPECT_EQ(ft::fake_cuda_counters().streams_created, 2u);
  pool.release(std::move(*b));
  pool.release(std::move(got->front()));
  pool.clear();
}

TEST_F(Budget, IdleKitsOfOtherShapesAreFreedToMakeRoom) {
  fd::StagingPool pool(16 * kMiB);
  auto small = pool.acquire({&api, 0, 2 * kMiB}, 2);
  auto other = pool.acquire({&api, 0, 2 * kMiB}, 4);
  ASSERT_TRUE(small.ok() && other.ok());
  pool.release(std::move(*small));
  pool.release(std::move(*other));
  auto big = pool.acquire({&api, 0, 8 * kMiB}, 2);  // 16 MiB: both idle kits must go
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_EQ(ft::fake_cuda_counters().streams_destroyed, 2u);
  EXPECT_LE(pool.kits_that_fit(8 * kMiB, 2), 1u);
  pool.release(std::move(*big));
  pool.clear();
}

TEST_F(Budget, CallersAreServedInTurnAndGetAllTheirKitsAtOnce) {
  fd::StagingPool pool(32 * kMiB);  // four kits
  auto held = kit(pool);
  ASSERT_TRUE(held.ok());
  // Four kits at once wait for the one held; a single kit asked for afterwards waits behind them, although
  // it would fit now: nobody holds part of what they need while others wait.
  std::atomic<int> order{0};
  int four_served = 0, one_served = 0;
  auto four = std::async(std::launch::async, [&] {
    EXPECT_TRUE(fd::make_current(api, 0).ok());
    const unsigned counts[] = {2, 2, 2, 2};
    auto got = pool.acquire({&api, 0, 4 * kMiB}, counts);
    four_served = ++order;
    return got;
  });
  ASSERT_TRUE(still_waiting(four));
  auto one = std::async(std::launch::async, [&] {
    EXPECT_TRUE(fd::make_current(api, 0).ok());
    auto got = pool.acquire({&api, 0, 4 * kMiB}, 2);
    one_served = ++order;
    return got;
  });
  EXPECT_TRUE(still_waiting(one)) << "a later caller went before an earlier one";
  EXPECT_EQ(ferry::pinned_memory_use().pinned_bytes, 8 * kMiB) << "the waiting caller holds part of its kits";
  pool.release(std::move(*held));
  auto kits = four.get();
  ASSERT_TRUE(kits.ok()) << kits.status().to_string();
  EXPECT_EQ(kits->size(), 4u);
  EXPECT_TRUE(still_waiting(one));
  for (auto& k : *kits) pool.release(std::move(k));
  auto last = one.get();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(four_served, 1);
  EXPECT_EQ(one_served, 2);
  EXPECT_LE(ferry::pinned_memory_use().peak_bytes, 32 * kMiB);
  pool.release(std::move(*last));
  pool.clear();
}

TEST_F(Budget, AWorkerIsToldNotNowAndCalledBackWhenAKitComesBack) {
  fd::StagingPool pool(16 * kMiB);
  auto a = kit(pool), b = kit(pool);
  ASSERT_TRUE(a.ok() && b.ok());
  const int owner = 0;
  std::atomic<int> calls{0};
  const std::function<void()> call = [&] { ++calls; };
  auto none = pool.acquire({&api, 0, 4 * kMiB}, 2, &owner, &call);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  EXPECT_TRUE(pool.room_wanted_by_other(&a)) << "holders are not told that someone waits";
  EXPECT_FALSE(pool.room_wanted_by_other(&owner)) << "a worker gives way to its own queue";
  EXPECT_EQ(calls.load(), 0);
  pool.release(std::move(*a));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_FALSE(pool.room_wanted_by_other(nullptr));
  auto now = pool.acquire({&api, 0, 4 * kMiB}, 2, &owner, &call);
  ASSERT_TRUE(now.ok() && *now != nullptr) << "called back, and still no kit";
  pool.release(std::move(*b));
  pool.release(std::move(*now));
  EXPECT_EQ(calls.load(), 1);
  pool.clear();
}

TEST_F(Budget, MoreThanTheWholeBudgetAtOnceIsRefusedNotWaitedFor) {
  fd::StagingPool pool(16 * kMiB);
  const unsigned counts[] = {2, 2, 2};
  auto too_many = pool.acquire({&api, 0, 4 * kMiB}, counts);
  EXPECT_THAT(too_many.status(), ft::StatusIs(ErrorCode::invalid_argument));
  EXPECT_NE(too_many.status().message().find("pinned_budget"), std::string::npos) << too_many.status().to_string();
  const int owner = 0;
  const std::function<void()> nothing = [] {};
  auto too_big = pool.acquire({&api, 0, 32 * kMiB}, 2, &owner, &nothing);
  EXPECT_THAT(too_big.status(), ft::StatusIs(ErrorCode::invalid_argument));
  EXPECT_NE(too_big.status().message().find("bounce_buffer_size"), std::string::npos);
  EXPECT_EQ(ft::fake_cuda_counters().streams_created, 0u);
}

TEST_F(Budget, AWarmUpReservesOnlyWhatFits) {
  fd::StagingPool pool(16 * kMiB);
  ASSERT_TRUE(pool.reserve({&api, 0, 4 * kMiB}, 2, 16).ok());
  EXPECT_EQ(ft::fake_cuda_counters().streams_created, 2u) << "a warm-up went past the budget";
  pool.clear();
}

// Kits are made one at a time. A caller waiting for its turn to make one takes a kit released meanwhile rather than
// wait for the maker: on the GPU machine half of a batch run's workers waited up to 5.6 ms for the making lock while
// kits went idle (bench/results/2026-12-06-h100-kit-timeline).
TEST_F(Budget, ACallerWaitingToMakeAKitTakesOneReleasedMeanwhile) {
  fd::StagingPool pool(64 * kMiB);
  auto first = kit(pool);
  ASSERT_TRUE(first.ok());
  const fd::CUstream released_stream = (*first)->stream;
  ft::fake_cuda_script().pinned_alloc_delay = std::chrono::milliseconds(400);  // each pinning call
  auto in_thread = [&] {
    return std::async(std::launch::async, [&] {
      EXPECT_TRUE(fd::make_current(api, 0).ok());
      return kit(pool);
    });
  };
  auto maker = in_thread();  // makes a kit: 400 ms or more
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto started = std::chrono::steady_clock::now();
  auto waiter = in_thread();  // granted a kit to make, and waits for its turn
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  pool.release(std::move(*first));
  ASSERT_EQ(waiter.wait_for(std::chrono::milliseconds(300)), std::future_status::ready)
      << "the caller waited for the maker instead of taking the kit released meanwhile";
  auto taken = waiter.get();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(500));
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ((*taken)->stream, released_stream);
  auto made = maker.get();
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(ft::fake_cuda_counters().streams_created, 2u) << "two kits made (a stream each), none more";
  ft::fake_cuda_script().pinned_alloc_delay = std::chrono::microseconds(0);
  pool.release(std::move(*taken));
  pool.release(std::move(*made));
  pool.clear();
}

}  // namespace
}  // namespace ferry
