// StagingPool hands out the kit released last: a small request then meets a stream and buffers that were
// just in use, not the ones idle longest.
#include "backends/staging_pool.hpp"

#include <gtest/gtest.h>

#include "platform/cuda/primary_context.hpp"
#include "support/fake_cuda.hpp"

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
    auto first = pool.acquire(api, 0, 1 << 20, 2);
    auto second = pool.acquire(api, 0, 1 << 20, 2);
    auto third = pool.acquire(api, 0, 1 << 20, 2);
    ASSERT_TRUE(first.ok() && second.ok() && third.ok());
    const fd::CUstream second_stream = (*second)->stream, third_stream = (*third)->stream;
    pool.release(std::move(*first));
    pool.release(std::move(*second));
    pool.release(std::move(*third));
    auto again = pool.acquire(api, 0, 1 << 20, 2);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->stream, third_stream) << "not the kit released last";
    auto next = pool.acquire(api, 0, 1 << 20, 2);
    ASSERT_TRUE(next.ok());
    EXPECT_EQ((*next)->stream, second_stream);
    auto other_shape = pool.acquire(api, 0, 2 << 20, 2);  // only kits of the asked shape are taken
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

}  // namespace
}  // namespace ferry
